// The progress line of long work, on stderr so stdout keeps only results. On a terminal it
// rewrites one line in place; otherwise (logs, pipes, tests) it prints a line per update, at most
// one a second so that logs stay short.
//
//   Progress p(quiet);
//   p.update("compiling graph mode");
//   p.done();
#ifndef SUPERKERNEL_TOOLS_PROGRESS_H_
#define SUPERKERNEL_TOOLS_PROGRESS_H_

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace sk::cli {

class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(const std::string& what) {
    if (quiet_) return;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[superkernel] %s", what.c_str());
      open_ = true;
    } else {
      const auto now = std::chrono::steady_clock::now();
      if (printed_ && now - last_ < std::chrono::seconds(1)) return;
      std::fprintf(stderr, "[superkernel] %s\n", what.c_str());
      printed_ = true;
      last_ = now;
    }
    std::fflush(stderr);
  }
  // Ends the line in place, so that what follows starts on a fresh one.
  void done() {
    if (!open_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    open_ = false;
  }

 private:
  bool quiet_;
  bool tty_;
  bool open_ = false;
  bool printed_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace sk::cli

#endif  // SUPERKERNEL_TOOLS_PROGRESS_H_
