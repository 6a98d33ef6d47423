"""The C++ model library's architectures as config.json's model_type names them, in one place
(no torch import, so the command line can read it before it loads a model).

One C++ builder per config class: LlamaConfig's families (build_llama), DeepseekConfig's
(build_deepseek); LongCat-Flash has a PyTorch sample beside its C++ builder.
"""

LLAMA_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe")
DEEPSEEK_FAMILIES = ("deepseek_v2", "deepseek_v3")
# Architectures with no PyTorch sample in superkernel.models: generate and serve run them on
# superkernel.models.cpp_model.CppModel.
CPP_ONLY = LLAMA_FAMILIES + DEEPSEEK_FAMILIES
