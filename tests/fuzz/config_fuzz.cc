// Fuzz target: YAML model configs (src/config), parsed from memory as `superkernel` parses a
// config file.
// Invariants: no crash and no exception; every error starts with the file name and a line
// ("fuzz.yaml:N: ..."), so a user can always find the place at fault.
#include <string>

#include "config/config.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sk::Expected<sk::config::Config> cfg = sk::config::parse_config(text, "fuzz.yaml");
  if (!cfg) {
    const std::string msg = cfg.status().message();
    SK_FUZZ_CHECK(msg.rfind("fuzz.yaml:", 0) == 0, "error does not start with file:line: " + msg);
  }
  return 0;
}
