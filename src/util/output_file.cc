#include "superkernel/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace sk {

namespace {

std::string reason(int err) { return std::strerror(err); }

Status cannot_write(const std::string& path, const std::string& what, int err) {
  return Status::failed_precondition("cannot write '" + path + "': " + what + ": " + reason(err));
}

// Temporary names are unique within the process (a counter) and across processes (the pid).
std::string temp_name(const std::string& path) {
  static std::atomic<unsigned> next{0};
  return path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(next.fetch_add(1));
}

}  // namespace

Expected<OutputFile> OutputFile::open(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("cannot write a file with an empty path");
  OutputFile f;
  f.path_ = path;
  // A symbolic link is followed: the file it names is replaced, not the link.
  std::string real = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* resolved = ::realpath(path.c_str(), nullptr)) {
      real = resolved;
      std::free(resolved);
    }
  }
  const bool exists = ::stat(real.c_str(), &st) == 0;
  const bool in_place = exists && !S_ISREG(st.st_mode);
  if (in_place && S_ISDIR(st.st_mode))
    return Status::invalid_argument("cannot write '" + path + "': it is a directory");
  if (!in_place) f.temp_ = temp_name(real);
  f.target_ = real;
  const std::string& target = in_place ? path : f.temp_;
  // 0666 before the umask, as a file made by fopen or std::ofstream.
  const int flags = O_WRONLY | O_CLOEXEC | (in_place ? O_TRUNC : O_CREAT | O_EXCL);
  f.fd_ = ::open(target.c_str(), flags, 0666);
  if (f.fd_ < 0) {
    const int err = errno;
    f.temp_.clear();  // nothing was created
    std::string msg = "cannot write '" + path + "': " + reason(err);
    return err == ENOENT || err == ENOTDIR ? Status::not_found(std::move(msg))
                                           : Status::invalid_argument(std::move(msg));
  }
  // A file that replaces another keeps its permissions.
  if (exists && !in_place) (void)::fchmod(f.fd_, st.st_mode & 07777);
  return f;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      fd_(std::exchange(other.fd_, -1)),
      failed_(other.failed_) {
  other.temp_.clear();
}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    target_ = std::move(other.target_);
    temp_ = std::move(other.temp_);
    other.temp_.clear();
    fd_ = std::exchange(other.fd_, -1);
    failed_ = other.failed_;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

Status OutputFile::write(const void* data, size_t size) {
  if (fd_ < 0 || failed_) return Status::failed_precondition("cannot write '" + path_ + "': an earlier write failed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      return cannot_write(path_, "write", n < 0 ? errno : EIO);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status OutputFile::commit() {
  if (fd_ < 0 || failed_) return Status::failed_precondition("cannot write '" + path_ + "': an earlier write failed");
  // fsync of a device or FIFO written in place may be refused (EINVAL); only a regular file must
  // reach the disk before it takes PATH's place.
  if (!temp_.empty() && ::fsync(fd_) != 0) {
    const int err = errno;
    discard();
    return cannot_write(path_, "flush", err);
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const int err = errno;
    discard();
    return cannot_write(path_, "close", err);
  }
  if (!temp_.empty()) {
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
      const int err = errno;
      discard();
      return cannot_write(path_, "rename from '" + temp_ + "'", err);
    }
    temp_.clear();
  }
  return Status::ok();
}

Status write_file(const std::string& path, std::string_view bytes) {
  auto f = OutputFile::open(path);
  if (!f) return f.status();
  SK_RETURN_IF_ERROR(f->write(bytes));
  return f->commit();
}

}  // namespace sk
