#include "reports/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "reports/report_writer.hpp"

namespace numprobe::reports::detail {
namespace {

constexpr double k_w = 680, k_h = 340, k_left = 78, k_right = 24, k_top = 28, k_bottom = 52;
constexpr const char* k_colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};

// One axis: maps data to pixels, linear or log10.
struct axis {
  bool log = false;
  double lo = 0, hi = 1;  // in transformed units
  double p0 = 0, p1 = 1;  // pixels

  [[nodiscard]] double t(double v) const { return log ? std::log10(v) : v; }
  [[nodiscard]] double px(double v) const { return p0 + (t(v) - lo) / (hi - lo) * (p1 - p0); }
  [[nodiscard]] bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }

  void fit(double mn, double mx) {
    if (!(mn <= mx)) mn = mx = log ? 1.0 : 0.0;
    lo = t(mn), hi = t(mx);
    if (log) {
      lo = std::floor(lo * 4) / 4, hi = std::ceil(hi * 4) / 4;
    } else {
      const double pad = (hi - lo) * 0.05;
      lo -= pad, hi += pad;
    }
    if (hi - lo < 1e-12) {
      lo -= log ? 0.5 : std::max(1.0, std::fabs(lo) * 0.1);
      hi += log ? 0.5 : std::max(1.0, std::fabs(hi) * 0.1);
    }
  }

  // Tick values (data units) and their labels.
  [[nodiscard]] std::vector<std::pair<double, std::string>> ticks() const {
    std::vector<std::pair<double, std::string>> out;
    if (log) {
      const int a = static_cast<int>(std::ceil(lo - 1e-9)), b = static_cast<int>(std::floor(hi + 1e-9));
      const bool sub = b - a < 2;
      for (int e = a - 1; e <= b; ++e)
        for (double m : sub ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
          const double v = m * std::pow(10.0, e);
          if (t(v) >= lo - 1e-9 && t(v) <= hi + 1e-9) out.emplace_back(v, fmt::format("{:g}", v));
        }
    } else {
      const double span = hi - lo, raw = span / 5;
      const double mag = std::pow(10.0, std::floor(std::log10(raw)));
      const double step = raw / mag < 2 ? mag * 2 : raw / mag < 5 ? mag * 5 : mag * 10;
      for (double v = std::ceil(lo / step) * step; v <= hi + 1e-12; v += step)
        out.emplace_back(v, fmt::format("{:g}", std::fabs(v) < step * 1e-6 ? 0.0 : v));
    }
    return out;
  }
};

std::string frame(const axis& x, const axis& y, const std::string& x_label, const std::string& y_label) {
  std::string s = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#999\"/>\n", k_left, k_top,
      k_w - k_left - k_right, k_h - k_top - k_bottom);
  for (const auto& [v, label] : x.ticks()) {
    const double p = x.px(v);
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\" class=\"tick\">{4}</text>\n",
                     p, k_top, k_h - k_bottom, k_h - k_bottom + 16, label);
  }
  for (const auto& [v, label] : y.ticks()) {
    const double p = y.px(v);
    s += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\" class=\"tick\">{5}</text>\n",
                     k_left, k_w - k_right, p, k_left - 6, p + 4, label);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"label\">{}</text>\n",
                   (k_left + k_w - k_right) / 2, k_h - 12, xml_escape(x_label));
  s += fmt::format("<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\" class=\"label\">{}</text>\n",
                   (k_top + k_h - k_bottom) / 2, xml_escape(y_label));
  return s;
}

std::string open_svg(const std::string& kind, const std::string& title) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" data-kind=\"{}\" "
                     "viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\">\n<title>{}</title>\n",
                     kind, k_w, k_h, k_w, k_h, xml_escape(title));
}

}  // namespace

std::string svg_curve(const result::curve& c) {
  axis x{c.log_x, 0, 1, k_left, k_w - k_right}, y{c.log_y, 0, 1, k_h - k_bottom, k_top};
  double xmn = std::numeric_limits<double>::infinity(), xmx = -xmn, ymn = xmn, ymx = -xmn;
  for (const auto& s : c.lines)
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (x.usable(s.x[i]) && y.usable(s.y[i])) {
        xmn = std::min(xmn, s.x[i]), xmx = std::max(xmx, s.x[i]);
        ymn = std::min(ymn, s.y[i]), ymx = std::max(ymx, s.y[i]);
      }
  for (const auto& b : c.bounds)
    if (y.usable(b.y)) ymn = std::min(ymn, b.y), ymx = std::max(ymx, b.y);
  x.fit(xmn, xmx);
  y.fit(ymn, ymx);
  std::string s = open_svg("curve", c.title);
  s += frame(x, y, c.x_label, c.y_label);
  // Tile boundaries inside the plotted range; thinned when they would merge into a grey wash.
  std::vector<double> tb;
  for (double v : c.tile_boundaries)
    if (x.usable(v) && x.t(v) >= x.lo && x.t(v) <= x.hi) tb.push_back(v);
  const std::size_t every = tb.size() > 160 ? (tb.size() + 159) / 160 : 1;
  for (std::size_t i = 0; i < tb.size(); i += every)
    s += fmt::format("<line class=\"tile\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#bbb\" "
                     "stroke-dasharray=\"2,3\" stroke-width=\"0.7\"/>\n",
                     x.px(tb[i]), k_top, k_h - k_bottom);
  for (const auto& b : c.bounds) {
    if (!y.usable(b.y)) continue;
    s += fmt::format("<line class=\"bound\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#d62728\" "
                     "stroke-dasharray=\"6,4\" stroke-width=\"1.5\"/><text x=\"{3}\" y=\"{4:.1f}\" "
                     "text-anchor=\"end\" class=\"boundlabel\">{5}</text>\n",
                     k_left, k_w - k_right, y.px(b.y), k_w - k_right - 4, y.px(b.y) - 4, xml_escape(b.label));
  }
  for (std::size_t li = 0; li < c.lines.size(); ++li) {
    const auto& ln = c.lines[li];
    const char* col = k_colours[li % std::size(k_colours)];
    std::string pts, marks;
    for (std::size_t i = 0; i < ln.x.size() && i < ln.y.size(); ++i) {
      if (!x.usable(ln.x[i]) || !y.usable(ln.y[i])) continue;
      const double px = x.px(ln.x[i]), py = y.px(ln.y[i]);
      pts += fmt::format("{:.1f},{:.1f} ", px, py);
      marks += fmt::format("<circle class=\"pt\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.6\" fill=\"{}\"><title>{}: x={:g} "
                           "y={:.4g}</title></circle>",
                           px, py, col, xml_escape(ln.name), ln.x[i], ln.y[i]);
    }
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.4\" points=\"{}\"/>\n{}\n", col, pts, marks);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" "
                     "class=\"legend\">{}</text>\n",
                     k_left + 8, k_top + 8 + 16 * li, col, k_left + 22, k_top + 17 + 16 * li, xml_escape(ln.name));
  }
  if (!tb.empty())
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"legend\" fill=\"#777\">dotted: key-tile boundaries{}</text>\n",
                     k_left + 8, k_top + 8 + 16 * c.lines.size() + 10,
                     every > 1 ? fmt::format(" (every {}th shown)", every) : "");
  return s + "</svg>\n";
}

std::string svg_histogram(const result::histogram& h) {
  axis x{h.log_x, 0, 1, k_left, k_w - k_right}, y{false, 0, 1, k_h - k_bottom, k_top};
  double cmax = 0;
  for (double v : h.counts) cmax = std::max(cmax, v);
  if (h.edges.size() >= 2) x.fit(h.edges.front(), h.edges.back());
  y.lo = 0, y.hi = cmax > 0 ? cmax * 1.05 : 1;
  std::string s = open_svg("histogram", h.title);
  s += frame(x, y, h.x_label, "count");
  for (std::size_t i = 0; i < h.counts.size() && i + 1 < h.edges.size(); ++i) {
    if (!x.usable(h.edges[i]) || !x.usable(h.edges[i + 1]) || !(h.counts[i] > 0)) continue;
    const double x0 = x.px(h.edges[i]), x1 = x.px(h.edges[i + 1]), y0 = y.px(h.counts[i]);
    s += fmt::format("<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#1f77b4\" "
                     "stroke=\"#fff\" stroke-width=\"0.5\"><title>[{:.3g}, {:.3g}): {:g}</title></rect>\n",
                     x0, y0, std::max(0.5, x1 - x0), y.px(0) - y0, h.edges[i], h.edges[i + 1], h.counts[i]);
  }
  return s + "</svg>\n";
}

std::string svg_heat_map(const result::heat_map& h) {
  const double W = k_w - k_left - k_right - 60, H = k_h - k_top - k_bottom;
  const double cw = h.cols ? W / static_cast<double>(h.cols) : 0, ch = h.rows ? H / static_cast<double>(h.rows) : 0;
  double vmax = 0;
  for (double v : h.values)
    if (std::isfinite(v)) vmax = std::max(vmax, v);
  std::string s = open_svg("heatmap", h.title);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#999\"/>\n", k_left, k_top, W, H);
  auto colour = [&](double v) {
    const double f = vmax > 0 && std::isfinite(v) ? std::clamp(v / vmax, 0.0, 1.0) : 0.0;
    // white -> dark red
    return fmt::format("rgb({},{},{})", static_cast<int>(255 - 100 * f), static_cast<int>(255 - 235 * f),
                       static_cast<int>(255 - 225 * f));
  };
  for (std::int64_t r = 0; r < h.rows; ++r)
    for (std::int64_t c = 0; c < h.cols; ++c) {
      const double v = h.values[static_cast<std::size_t>(r * h.cols + c)];
      s += fmt::format("<rect class=\"cell\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">"
                       "<title>{} {}, {} {}: {:g}</title></rect>",
                       k_left + cw * static_cast<double>(c), k_top + ch * static_cast<double>(r), cw + 0.05, ch + 0.05,
                       colour(v), xml_escape(h.row_label), r * h.row_step, xml_escape(h.col_label), c * h.col_step, v);
    }
  s += "\n";
  // Colour scale.
  const double lx = k_left + W + 20;
  for (int i = 0; i < 10; ++i)
    s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"{:.1f}\" fill=\"{}\"/>", lx,
                     k_top + H * (9 - i) / 10.0, H / 10.0 + 0.5, colour(vmax * (i + 0.5) / 10.0));
  s += fmt::format("\n<text x=\"{}\" y=\"{}\" class=\"tick\">{:g}</text><text x=\"{}\" y=\"{}\" class=\"tick\">0</text>\n",
                   lx + 18, k_top + 10, vmax, lx + 18, k_top + H);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"label\">{} (x {})</text>\n", k_left + W / 2,
                   k_h - 12, xml_escape(h.col_label), h.col_step);
  s += fmt::format("<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\" class=\"label\">{} (x {})</text>\n",
                   k_top + H / 2, xml_escape(h.row_label), h.row_step);
  return s + "</svg>\n";
}

}  // namespace numprobe::reports::detail
