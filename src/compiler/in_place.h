// Pass: in_place. An op whose output is exactly the same view as one of its inputs (Graph::verify
// allows that, and only that, kind of aliasing) runs in place only if its kernel can: no core may
// write bytes of the shared view that another core reads, per the kernel's access callback
// (without one, every core reads the whole input and writes the whole output, so no kernel
// without a callback runs in place on several cores). Checked for the op's own core count and for
// two cores, so that whether a graph compiles does not depend on the machine. A kernel that also
// cannot work in place on one core (reading an element after writing it) must reject the alias
// itself, as the built-in ones do.
#ifndef SUPERKERNEL_COMPILER_IN_PLACE_H_
#define SUPERKERNEL_COMPILER_IN_PLACE_H_

#include <string>

#include "compiler/compile_context.h"

namespace sk {

Status check_in_place(CompileContext& ctx);
// The in-place (output, input) pairs of the plan, one line each, for print_after.
std::string describe_in_place(const CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_IN_PLACE_H_
