// Pass: replicate_kernels (every mode, after build_plan). With kernel_replicas = N > 1, every
// kernel op gets the descriptors of its kernel in N copies of its package, each loaded at its own
// addresses (KernelRegistry::replicas); core c of a launch then calls copy c % N, so cores run
// distinct code addresses, as the original system replicates sub-kernels per core.
//
//   SK_RETURN_IF_ERROR(replicate_kernels(ctx));   // plan ops' `replicas` filled
#ifndef SUPERKERNEL_COMPILER_REPLICATE_KERNELS_H_
#define SUPERKERNEL_COMPILER_REPLICATE_KERNELS_H_

#include "compiler/compile_context.h"

namespace sk {

Status replicate_kernels(CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_REPLICATE_KERNELS_H_
