// Where a launch's cores run when another process takes some of the runtime's CPUs
// (RuntimeOptions::load_policy; docs/OPTIONS.md, docs/ARCHITECTURE.md "Load policy").
//
//   sk::RuntimeOptions o;
//   o.load_policy = sk::LoadPolicy::kStatic;                     // or, from text:
//   if (auto p = sk::parse_load_policy("one_thread"); p) o.load_policy = *p;
#ifndef SUPERKERNEL_LOAD_POLICY_H_
#define SUPERKERNEL_LOAD_POLICY_H_

#include <string_view>

#include "superkernel/status.h"

namespace sk {

enum class LoadPolicy {
  kAdaptive,   // one thread per core; on a 2-core runtime whose CPU another process holds, every
               // launch on the free CPU's thread, its cores interleaved, until the load is gone
  kStatic,     // always one thread per core
  kOneThread,  // every launch on the calling thread, its cores interleaved (tests, measurements)
};
// "adaptive", "static", "one_thread".
const char* load_policy_name(LoadPolicy policy);
// The policy for a name, or an error listing them.
Expected<LoadPolicy> parse_load_policy(std::string_view text);

}  // namespace sk

#endif  // SUPERKERNEL_LOAD_POLICY_H_
