// The class sweep of `numprobe audit`: every bug class of NUMERICS.md in order, each probed by
// its function in audit_*_classes.cpp / audit_fp8_class.cpp (declared in audit_kit.hpp).
#include <algorithm>

#include "probes/audit.hpp"
#include "probes/audit_kit.hpp"
#include "probes/bisect_fp8.hpp"

namespace numprobe::probes {

std::vector<audit_class> run_audit_classes(bisect_context& ctx, const attention_case& base, std::int64_t seq_hi,
                                           bool quick, std::int64_t tile_q, std::int64_t tile_k,
                                           std::vector<audit_error>& errors) {
  using namespace audit_kit;
  const auto& under_test = ctx.base_provider();
  const auto fp8_points = active_fp8_points(under_test);
  runner r(ctx, errors, fp8_points.empty() ? under_test : restore_fp8_points(under_test, fp8_points));
  layout L;
  L.tile_q = tile_q;
  L.tile_k = tile_k;
  L.quick = quick;
  L.decode = ctx.decode();
  L.seq_hi = seq_hi;
  L.decode_queries = std::clamp<std::int64_t>(base.queries, 1, 8);
  std::vector<audit_class> out;
  out.push_back(empty_split(r, base, L));
  out.push_back(finite_sentinel(r, base, L));
  out.push_back(rescale_frame(r, base, L));
  out.push_back(accumulation(r, base, L));
  out.push_back(index_threshold(r, base, L));
  out.push_back(mask_geometry(r, base, L));
  out.push_back(tail_tile(r, base, L));
  out.push_back(gqa_mapping(r, base, L));
  out.push_back(fp8_scaling(r, base, L));
  out.push_back({"sub-byte formats", "not-applicable",
                 {"attention kernels take no sub-byte (fp4/fp6/int4) inputs here; audit quantizers with `numprobe quant`"},
                 {}, {}});
  out.push_back(wavefront(r, base, L));
  return out;
}

std::vector<std::string> failing_classes(const std::vector<audit_class>& classes) {
  std::vector<std::string> out;
  for (const auto& c : classes)
    if (c.verdict == "fail") out.push_back(c.name);
  return out;
}

}  // namespace numprobe::probes
