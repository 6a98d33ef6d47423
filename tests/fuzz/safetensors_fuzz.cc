// Fuzz target: the safetensors reader on arbitrary file contents (header length, JSON header,
// offsets, dtypes, shapes). The bytes go to an anonymous in-memory file, opened by path as a user
// would open a checkpoint shard.
// Invariants: no crash; an error names the file; an accepted file's tensors lie inside the
// mapping (every byte is read, so ASan sees a stray one), their byte counts match shape and
// dtype, and each name is found again by find().
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "fuzz/fuzz_input.h"
#include "superkernel/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("sk_fuzz_safetensors", 0);
  SK_FUZZ_CHECK(fd >= 0, "memfd_create failed");
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    SK_FUZZ_CHECK(n > 0, "write to the in-memory file failed");
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  {
    sk::Expected<std::shared_ptr<sk::SafetensorsFile>> file = sk::SafetensorsFile::open(path);
    if (!file) {
      const std::string msg = file.status().message();
      SK_FUZZ_CHECK(msg.find(path) != std::string::npos, "error does not name the file: " + msg);
    } else {
      uint64_t sum = 0;
      for (const sk::SafetensorsTensor& t : (*file)->tensors()) {
        SK_FUZZ_CHECK(static_cast<uint64_t>(sk::shape_numel(t.shape)) * sk::dtype_size(t.dtype) == t.bytes,
                      "tensor '" + t.name + "': byte count does not match its shape and dtype");
        for (size_t i = 0; i < t.bytes; ++i) sum += t.data[i];
        SK_FUZZ_CHECK((*file)->find(t.name) == &t, "find() does not return tensor '" + t.name + "'");
      }
      volatile uint64_t sink = sum;  // keeps the reads
      (void)sink;
    }
  }
  close(fd);
  return 0;
}
