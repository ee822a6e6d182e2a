// The one knob reader (src/providers/knobs.hpp): backend specs and bounded, whole-text numbers.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "numprobe/base/error.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe {
namespace {

TEST(knobs, backend_spec) {
  const backend_spec a = parse_backend_spec("exec:python3 k.py {in} {out}");
  EXPECT_EQ(a.kind, "exec");
  EXPECT_EQ(a.arg, "python3 k.py {in} {out}");
  EXPECT_TRUE(a.has_arg);
  const backend_spec b = parse_backend_spec("cuda");
  EXPECT_EQ(b.kind, "cuda");
  EXPECT_FALSE(b.has_arg);
  const backend_spec c = parse_backend_spec("plugin:");
  EXPECT_TRUE(c.has_arg);
  EXPECT_TRUE(c.arg.empty());
  EXPECT_EQ(parse_backend_spec("exec:a:b").arg, "a:b");  // only the first ':' splits
}

TEST(knobs, integers_are_whole_and_bounded) {
  const std::map<std::string, std::string> m{{"splits", "7"}, {"bad", "12abc"}, {"big", "70000"}, {"zero", "0"}};
  const knob_reader k(m);
  EXPECT_EQ(k.integer("splits", 1, 65535), 7);
  EXPECT_THROW((void)k.integer("bad", 1, 65535), error);
  EXPECT_THROW((void)k.integer("big", 1, 65535), error);
  EXPECT_THROW((void)k.integer("zero", 1, std::numeric_limits<std::int64_t>::max()), error);
  try {
    (void)k.integer("big", 1, 65535);
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("--big"), std::string::npos) << e.what();
  }
}

TEST(knobs, positive_numbers_and_unknown_names) {
  const std::map<std::string, std::string> m{{"p-prescale", "448"}, {"neg", "-1"}, {"nan", "nan"}, {"x", "1e39"}};
  const knob_reader k(m);
  EXPECT_EQ(k.positive("p-prescale", 3.0e38), 448.0);
  EXPECT_THROW((void)k.positive("neg", 3.0e38), error);
  EXPECT_THROW((void)k.positive("nan", 3.0e38), error);
  EXPECT_THROW((void)k.positive("x", 3.0e38), error);
  const std::string* bad = k.first_unknown({"p-prescale", "neg", "nan"});
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(*bad, "x");
  EXPECT_EQ(k.first_unknown({"p-prescale", "neg", "nan", "x"}), nullptr);
}

}  // namespace
}  // namespace numprobe
