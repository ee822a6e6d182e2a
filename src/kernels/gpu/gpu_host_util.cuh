#pragma once
// Host helpers shared by the quantize and decode launchers: owned device memory, events,
// device selection. (gpu_backend.cu keeps its own copies in an anonymous namespace.)
#include <string>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_check.cuh"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu::host {

class buffer {
 public:
  buffer() = default;
  buffer(std::size_t bytes, const char* what) : m_bytes(bytes) {
    if (bytes == 0) return;
    const auto e = NUMPROBE_GPU_API(Malloc)(&m_ptr, bytes);
    if (e != platform::success) {
      m_ptr = nullptr;
      throw_backend_error(platform::vendor, std::string(platform::vendor) + "Malloc(" + what +
                                                ", " + std::to_string(bytes) +
                                                " bytes) failed: " + platform::error_string(e));
    }
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() {
    if (m_ptr) (void)NUMPROBE_GPU_API(Free)(m_ptr);
  }
  template <class U>
  [[nodiscard]] U* as() const { return static_cast<U*>(m_ptr); }
  [[nodiscard]] std::size_t bytes() const { return m_bytes; }
  // 0xFF bytes: NaN in fp32/fp16/bf16, an impossible code pattern for the checks.
  void poison() const {
    if (m_ptr) NUMPROBE_GPU_CHECK(Memset, m_ptr, 0xFF, m_bytes);
  }

 private:
  void* m_ptr = nullptr;
  std::size_t m_bytes = 0;
};

class event {
 public:
  event() { NUMPROBE_GPU_CHECK(EventCreate, &m_event); }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { (void)NUMPROBE_GPU_API(EventDestroy)(m_event); }
  [[nodiscard]] platform::event_t get() const { return m_event; }

 private:
  platform::event_t m_event{};
};

inline float elapsed_ms(const event& a, const event& b) {
  NUMPROBE_GPU_CHECK(EventSynchronize, b.get());
  float ms = 0.f;
  NUMPROBE_GPU_CHECK(EventElapsedTime, &ms, a.get(), b.get());
  return ms;
}

inline void select_device(int ordinal) {
  int n = 0;
  const auto e = NUMPROBE_GPU_API(GetDeviceCount)(&n);
  if (e != platform::success || n == 0) {
    (void)NUMPROBE_GPU_API(GetLastError)();
    throw_backend_error(platform::vendor,
                        std::string("no GPU device (") + platform::vendor + "GetDeviceCount: " +
                            (e != platform::success ? platform::error_string(e) : "0 devices") +
                            ")");
  }
  if (ordinal < 0 || ordinal >= n)
    throw_backend_error(platform::vendor, "device " + std::to_string(ordinal) +
                                              " does not exist (" + std::to_string(n) +
                                              " visible)");
  NUMPROBE_GPU_CHECK(SetDevice, ordinal);
}

}  // namespace numprobe::gpu::host
