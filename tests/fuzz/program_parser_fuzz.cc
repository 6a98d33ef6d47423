// Fuzz target: the Program text parser (parse_program), which loads saved per-core programs.
// Invariants: no crash or runaway allocation; an error names the line; accepted text
// round-trips (print(parse(print(parse(text)))) == print(parse(text))).
#include <string>

#include "fuzz/fuzz_input.h"
#include "program/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  sk::Program program;
  sk::Status s = sk::parse_program(text, &program);
  if (!s) {
    SK_FUZZ_CHECK(s.message().find("program text line ") == 0, "error does not name the line: " + s.message());
    return 0;
  }
  const std::string printed = sk::print_program(program);
  sk::Program again;
  sk::Status s2 = sk::parse_program(printed, &again);
  SK_FUZZ_CHECK(s2.is_ok(), "printed program does not parse: " + s2.message() + "\n" + printed);
  SK_FUZZ_CHECK(sk::print_program(again) == printed, "parse(print(p)) prints differently:\n" + printed);
  return 0;
}
