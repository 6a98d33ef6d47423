// CompileOptions: mode switches, text front-end, validation rules.
#include <gtest/gtest.h>

#include "superkernel/options.h"

namespace sk {
namespace {

bool contains(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

TEST(CompileOptions, ModesFollowTheTwoSwitches) {
  EXPECT_EQ(CompileOptions::for_mode(ExecutionMode::kEager).mode(), ExecutionMode::kEager);
  EXPECT_EQ(CompileOptions::for_mode(ExecutionMode::kGraph).mode(), ExecutionMode::kGraph);
  EXPECT_EQ(CompileOptions::for_mode(ExecutionMode::kSuperKernel).mode(), ExecutionMode::kSuperKernel);
  CompileOptions o;
  EXPECT_EQ(o.mode(), ExecutionMode::kGraph);
}

TEST(CompileOptions, OptimizeRequiresStaticCompile) {
  CompileOptions o;
  o.static_kernel_compile = false;
  o.super_kernel_optimize = true;
  Status s = o.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s, "super_kernel_optimize"));
  EXPECT_TRUE(contains(s, "static_kernel_compile"));
}

TEST(CompileOptions, SetParsesTypedValues) {
  CompileOptions o;
  ASSERT_TRUE(o.set("static_kernel_compile", "true").is_ok());
  ASSERT_TRUE(o.set("super_kernel_optimize", "1").is_ok());
  ASSERT_TRUE(o.set("super_kernel_debug_options.debug_sync_all", "on").is_ok());
  ASSERT_TRUE(o.set("super_kernel_debug_options.debug_per_op_max_core_num", "3").is_ok());
  EXPECT_TRUE(o.super_kernel_debug_options.debug_sync_all);
  EXPECT_EQ(o.super_kernel_debug_options.debug_per_op_max_core_num, 3);
  EXPECT_EQ(o.mode(), ExecutionMode::kSuperKernel);
}

TEST(CompileOptions, TilingSinkDefaultsOnAndIsABoolean) {
  CompileOptions o;
  EXPECT_TRUE(o.super_kernel_optimize_options.tiling_sink);
  ASSERT_TRUE(o.set("super_kernel_optimize_options.tiling_sink", "false").is_ok());
  EXPECT_FALSE(o.super_kernel_optimize_options.tiling_sink);
  Status bad = o.set("super_kernel_optimize_options.tiling_sink", "host");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad, "option 'super_kernel_optimize_options.tiling_sink': expected a boolean"))
      << bad.to_string();
  EXPECT_FALSE(o.super_kernel_optimize_options.tiling_sink);  // a rejected value changes nothing
}

TEST(CompileOptions, UnknownKeyIsNamed) {
  CompileOptions o;
  Status s = o.set("super_kernel_optimize_options.warp_speed", "1");
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s, "super_kernel_optimize_options.warp_speed"));
  EXPECT_FALSE(o.set("nonsense", "1").is_ok());
}

TEST(CompileOptions, WrongValueTypeNamesTheKey) {
  CompileOptions o;
  Status b = o.set("super_kernel_optimize", "maybe");
  ASSERT_FALSE(b.is_ok());
  EXPECT_TRUE(contains(b, "'super_kernel_optimize'"));
  EXPECT_TRUE(contains(b, "boolean"));
  Status i = o.set("super_kernel_debug_options.debug_per_op_max_core_num", "two");
  ASSERT_FALSE(i.is_ok());
  EXPECT_TRUE(contains(i, "debug_per_op_max_core_num"));
  EXPECT_TRUE(contains(i, "integer"));
  EXPECT_FALSE(o.set("super_kernel_debug_options.debug_per_op_max_core_num", "-1").is_ok());
  Status a = o.set("super_kernel_optimize_options.func_align", "48");
  ASSERT_FALSE(a.is_ok());
  EXPECT_TRUE(contains(a, "power of two"));
}

TEST(CompileOptions, RegexListsAreValidated) {
  CompileOptions o;
  ASSERT_TRUE(o.set("super_kernel_optimize_options.dcci_before_kernel_start", "matmul.*, add\\.f32").is_ok());
  EXPECT_EQ(o.super_kernel_optimize_options.dcci_before_kernel_start.size(), 2u);
  Status star = o.set("super_kernel_optimize_options.dcci_after_kernel_end", "*matmul");
  ASSERT_FALSE(star.is_ok());
  EXPECT_TRUE(contains(star, "dcci_after_kernel_end"));
  EXPECT_TRUE(contains(star, "begins with '*'"));
  Status bad = o.set("super_kernel_optimize_options.dcci_disable_on_kernel", "mat(mul");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad, "dcci_disable_on_kernel"));
  EXPECT_TRUE(contains(bad, "mat(mul"));
  // std::regex would overflow an int reading a long back-reference number.
  ASSERT_TRUE(o.set("super_kernel_optimize_options.dcci_disable_on_kernel", "(a)\\1").is_ok());
  Status backref = o.set("super_kernel_optimize_options.dcci_disable_on_kernel", "(a)\\33333333333333");
  ASSERT_FALSE(backref.is_ok());
  EXPECT_TRUE(contains(backref, "back-reference number longer than 3 digits"));
}

TEST(CompileOptions, ExecutionModeNamesRoundTrip) {
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto parsed = parse_execution_mode(execution_mode_name(m));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_FALSE(parse_execution_mode("turbo").has_value());
}

TEST(CompileOptions, OptimisationOptionsCheckTheirValues) {
  CompileOptions o;
  EXPECT_TRUE(o.set("super_kernel_optimize_options.preload_code", "max").is_ok());
  EXPECT_EQ(o.super_kernel_optimize_options.preload_code, PreloadCode::kMax);
  EXPECT_TRUE(o.set("super_kernel_optimize_options.sync_choice", "p2p").is_ok());
  EXPECT_EQ(o.super_kernel_optimize_options.sync_choice, SyncChoice::kPointToPoint);
  EXPECT_TRUE(o.set("super_kernel_optimize_options.early_start", "2").is_ok());
  EXPECT_EQ(o.super_kernel_optimize_options.early_start, 2);
  Status bad_preload = o.set("super_kernel_optimize_options.preload_code", "true");
  EXPECT_NE(bad_preload.message().find("none, per-func or max"), std::string::npos) << bad_preload.to_string();
  Status bad_sync = o.set("super_kernel_optimize_options.sync_choice", "barrier");
  EXPECT_NE(bad_sync.message().find("p2p or cost"), std::string::npos) << bad_sync.to_string();
  CompileOptions too_early;
  too_early.super_kernel_optimize_options.early_start = 3;
  Status v = too_early.validate();
  EXPECT_NE(v.message().find("0, 1 or 2"), std::string::npos) << v.to_string();
}

TEST(CompileOptions, EveryListedKeyIsAccepted) {
  for (const std::string& key : CompileOptions::keys()) {
    CompileOptions o;
    std::string value = "1";
    if (key == "dump_dir") value = "/tmp";
    if (key == "print_after") value = "segment";
    if (key.find("dcci") != std::string::npos) value = "x";
    if (key.ends_with(".preload_code")) value = "per-func";
    if (key.ends_with(".sync_choice")) value = "cost";
    EXPECT_TRUE(o.set(key, value).is_ok()) << key;
  }
}

}  // namespace
}  // namespace sk
