// Files the library, the command line and the benches write: whole or not at all, and every
// failure an error naming the path.
//
// A regular file is written to a temporary name beside it (`PATH.tmp-PID-N`), flushed to the disk,
// closed, every step checked, and only then renamed over PATH: a full disk, a read-only directory
// or a crash never leaves a truncated PATH, and a reader never sees half a file. A PATH that
// names something other than a regular file or nothing (a character device such as /dev/null or
// /dev/full, a FIFO, /dev/stdout) is written in place, since renaming over it would replace the
// device; its writes and its close are checked all the same. A symbolic link is followed.
//
//   if (sk::Status s = sk::write_file("bench.json", json); !s) return s;   // "cannot write 'bench.json': ..."
//
//   auto out = sk::OutputFile::open("model.safetensors");                 // large files, piece by piece
//   if (!out) return out.status();
//   SK_RETURN_IF_ERROR(out->write(header.data(), header.size()));
//   SK_RETURN_IF_ERROR(out->commit());      // without commit() the temporary file is removed
#ifndef SUPERKERNEL_OUTPUT_FILE_H_
#define SUPERKERNEL_OUTPUT_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "superkernel/status.h"

namespace sk {

class OutputFile {
 public:
  // Opens the temporary file (or PATH itself, for a device or FIFO). When it cannot be created, an
  // error naming the path and the system's reason: kNotFound for a missing directory, else
  // kInvalidArgument. Write and commit failures are kFailedPrecondition.
  static Expected<OutputFile> open(const std::string& path);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Not committed: closes and removes the temporary file; PATH is as it was.
  ~OutputFile();

  // Appends `size` bytes; short writes are retried, a failure (ENOSPC, EIO...) is an error naming
  // the path. After a failure every later call fails too.
  Status write(const void* data, size_t size);
  Status write(std::string_view bytes) { return write(bytes.data(), bytes.size()); }
  // Flushes to the disk, closes and renames the temporary file over PATH.
  Status commit();

  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  void discard();

  std::string path_;    // as given (messages name it)
  std::string target_;  // what is replaced: PATH, or the file its symbolic link names
  std::string temp_;    // empty: PATH is written in place
  int fd_ = -1;
  bool failed_ = false;
};

// Writes `bytes` to `path` through an OutputFile.
Status write_file(const std::string& path, std::string_view bytes);

}  // namespace sk

#endif  // SUPERKERNEL_OUTPUT_FILE_H_
