// Scope option strings: every rule of the "key=value:key=value" form.
#include <gtest/gtest.h>

#include "compiler/scope_options.h"
#include "superkernel/options.h"

namespace sk {
namespace {

Status parse_error(std::string_view text) {
  auto r = parse_scope_options("s1", text, nullptr);
  return r.has_value() ? Status::ok() : r.status();
}

bool mentions(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

TEST(ScopeOptions, ParsesEveryImplementedKey) {
  std::vector<std::string> warnings;
  auto o = parse_scope_options(
      "s1",
      "strict-scope-check=abort:debug-aic-num=2:debug-aiv-num=4:feed-sync-all=1:split-mode=3:debug-sync-all=1:"
      "profiling=1",
      &warnings);
  ASSERT_TRUE(o.has_value()) << o.status().to_string();
  EXPECT_EQ(o->strict_scope_check, StrictScopeCheck::kAbort);
  EXPECT_EQ(o->debug_aic_num, 2);
  EXPECT_EQ(o->debug_aiv_num, 4);
  EXPECT_EQ(o->feed_sync_all, 1);
  EXPECT_EQ(o->split_mode, 3);
  EXPECT_EQ(o->debug_sync_all, 1);
  EXPECT_EQ(o->profiling, 1);
  EXPECT_TRUE(warnings.empty());
}

TEST(ScopeOptions, EmptyStringMeansDefaults) {
  auto o = parse_scope_options("s1", "", nullptr);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->strict_scope_check, StrictScopeCheck::kDefault);
  EXPECT_EQ(o->feed_sync_all, -1);
}

TEST(ScopeOptions, UnknownKeyIsAnErrorNamingKeyAndScope) {
  Status s = parse_error("feed-sync-all=1:warp-drive=9");
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(mentions(s, "'warp-drive'"));
  EXPECT_TRUE(mentions(s, "scope 's1'"));
}

TEST(ScopeOptions, DuplicateKeyIsAnError) {
  Status s = parse_error("profiling=1:profiling=0");
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(mentions(s, "'profiling'"));
  EXPECT_TRUE(mentions(s, "twice"));
}

TEST(ScopeOptions, EmptyValueIsAnError) {
  Status s = parse_error("split-mode=");
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(mentions(s, "'split-mode'"));
  EXPECT_TRUE(mentions(s, "empty"));
}

TEST(ScopeOptions, InvalidValuesAreErrorsNamingTheKey) {
  for (const char* text : {"strict-scope-check=maybe", "feed-sync-all=2", "debug-sync-all=yes", "profiling=on",
                           "split-mode=0", "debug-aic-num=-1", "debug-aiv-num=x"}) {
    Status s = parse_error(text);
    ASSERT_FALSE(s.is_ok()) << text;
    std::string key(text, std::string(text).find('='));
    EXPECT_TRUE(mentions(s, "'" + key + "'")) << s.message();
    EXPECT_TRUE(mentions(s, "invalid value")) << s.message();
  }
}

TEST(ScopeOptions, PairWithoutEqualsIsAWarningAndSkipped) {
  std::vector<std::string> warnings;
  auto o = parse_scope_options("s1", "profiling:feed-sync-all=1", &warnings);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->profiling, -1);
  EXPECT_EQ(o->feed_sync_all, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'profiling'"), std::string::npos);
}

TEST(ScopeOptions, RecomputeIsASwitchInheritedFromEnclosingScopes) {
  auto on = parse_scope_options("outer", "recompute=1", nullptr);
  ASSERT_TRUE(on.has_value()) << on.status().to_string();
  EXPECT_EQ(on->recompute, 1);
  auto unset = parse_scope_options("inner", "", nullptr);
  ASSERT_TRUE(unset.has_value());
  EXPECT_EQ(unset->recompute, -1);
  unset->inherit(*on);
  EXPECT_EQ(unset->recompute, 1);
}

TEST(ScopeOptions, CodePreloadAndFunctionAlignmentParse) {
  auto r = parse_scope_options("s1", "preload-code=per-func:func-align=64", nullptr);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->preload_code, static_cast<int>(PreloadCode::kPerFunc));
  EXPECT_EQ(r->func_align, 64);
  auto max = parse_scope_options("s1", "preload-code=max", nullptr);
  ASSERT_TRUE(max.has_value());
  EXPECT_EQ(max->preload_code, static_cast<int>(PreloadCode::kMax));
  auto huge = parse_scope_options("s1", "func-align=8192", nullptr);
  ASSERT_FALSE(huge.has_value());
  EXPECT_TRUE(mentions(huge.status(), "up to 4096")) << huge.status().to_string();
}

TEST(ScopeOptions, OptimisationValuesAreChecked) {
  const std::pair<const char*, const char*> bad[] = {{"early-start=3", "0, 1 or 2"},
                                                     {"preload-code=1", "none, per-func or max"},
                                                     {"func-align=48", "power of two"},
                                                     {"recompute=yes", "0 or 1"},
                                                     {"sync-choice=barrier", "p2p or cost"}};
  for (const auto& [text, expect] : bad) {
    auto r = parse_scope_options("s1", text, nullptr);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(mentions(r.status(), expect)) << r.status().to_string();
    EXPECT_TRUE(mentions(r.status(), "scope 's1'")) << r.status().to_string();
  }
  auto off =
      parse_scope_options("s1", "early-start=0:preload-code=none:func-align=0:recompute=0:sync-choice=p2p", nullptr);
  ASSERT_TRUE(off.has_value()) << off.status().to_string();
  EXPECT_EQ(off->early_start, 0);
  EXPECT_EQ(off->preload_code, 0);
  EXPECT_EQ(off->recompute, 0);
  EXPECT_EQ(off->sync_choice, 0);
}

TEST(ScopeOptions, StreamFusionIsASwitchInheritedFromEnclosingScopes) {
  auto outer = parse_scope_options("outer", "stream-fusion=1", nullptr);
  ASSERT_TRUE(outer.has_value()) << outer.status().to_string();
  EXPECT_EQ(outer->stream_fusion, 1);
  auto inner = parse_scope_options("inner", "", nullptr);
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->stream_fusion, -1);
  inner->inherit(*outer);
  EXPECT_EQ(inner->stream_fusion, 1);
  Status bad = parse_error("stream-fusion=2");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(mentions(bad, "stream-fusion"));
}

TEST(ScopeOptions, TilingSinkIsASwitchInheritedFromEnclosingScopes) {
  auto outer = parse_scope_options("outer", "tiling-sink=0", nullptr);
  ASSERT_TRUE(outer.has_value()) << outer.status().to_string();
  EXPECT_EQ(outer->tiling_sink, 0);
  auto inner = parse_scope_options("inner", "", nullptr);
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->tiling_sink, -1);
  inner->inherit(*outer);
  EXPECT_EQ(inner->tiling_sink, 0);
  auto own = parse_scope_options("own", "tiling-sink=1", nullptr);
  ASSERT_TRUE(own.has_value());
  own->inherit(*outer);
  EXPECT_EQ(own->tiling_sink, 1);
  for (const char* bad : {"tiling-sink=2", "tiling-sink=on", "tiling-sink="}) {
    auto r = parse_scope_options("moe", bad, nullptr);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_TRUE(mentions(r.status(), "scope 'moe' option 'tiling-sink'")) << r.status().to_string();
  }
  auto twice = parse_scope_options("moe", "tiling-sink=1:tiling-sink=0", nullptr);
  ASSERT_FALSE(twice.has_value());
  EXPECT_TRUE(mentions(twice.status(), "scope 'moe' option 'tiling-sink' is given twice"))
      << twice.status().to_string();
}

TEST(ScopeOptions, AicAivRatiosAreRestricted) {
  for (const char* ok : {"debug-aic-num=1:debug-aiv-num=0", "debug-aic-num=0:debug-aiv-num=2",
                         "debug-aic-num=2:debug-aiv-num=2", "debug-aic-num=2:debug-aiv-num=4"})
    EXPECT_TRUE(parse_error(ok).is_ok()) << ok;
  for (const char* bad :
       {"debug-aic-num=2:debug-aiv-num=3", "debug-aic-num=0:debug-aiv-num=0", "debug-aic-num=3:debug-aiv-num=1"}) {
    Status s = parse_error(bad);
    ASSERT_FALSE(s.is_ok()) << bad;
    EXPECT_TRUE(mentions(s, "ratio"));
  }
}

TEST(ScopeOptions, InnerScopesInheritUnsetOptions) {
  auto outer = parse_scope_options("outer", "feed-sync-all=1:profiling=1", nullptr);
  auto inner = parse_scope_options("inner", "profiling=0", nullptr);
  ASSERT_TRUE(outer.has_value() && inner.has_value());
  ScopeOptions merged = *inner;
  merged.inherit(*outer);
  EXPECT_EQ(merged.feed_sync_all, 1);
  EXPECT_EQ(merged.profiling, 0);
}

}  // namespace
}  // namespace sk
