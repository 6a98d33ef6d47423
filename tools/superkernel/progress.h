// The progress line of long work, on stderr so stdout keeps only results. On a terminal it
// rewrites one line in place; otherwise (logs, pipes, tests) it prints one line per update.
//
//   Progress p(quiet);
//   p.update("compiling graph mode");
//   p.done();
#ifndef SUPERKERNEL_TOOLS_PROGRESS_H_
#define SUPERKERNEL_TOOLS_PROGRESS_H_

#include <unistd.h>

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
      std::fprintf(stderr, "[superkernel] %s\n", what.c_str());
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
};

}  // namespace sk::cli

#endif  // SUPERKERNEL_TOOLS_PROGRESS_H_
