#include "backend/backend.h"

#include <cstring>

namespace g4 {

StatusOr<DeviceBuffer> UploadConstant(Backend& backend, const void* host, size_t bytes, const char* what) {
  StatusOr<DeviceBuffer> buffer = backend.Allocate(bytes, what);
  if (!buffer.ok()) return buffer.status();
  if (bytes > 0) backend.CopyToDevice(buffer->data(), host, bytes);
  // The copy may still be in flight on a device stream; the caller's host
  // memory must not be freed before it lands.
  backend.Sync();
  return buffer;
}

}  // namespace g4
