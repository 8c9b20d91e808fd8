#pragma once
// A fixed-size array whose elements start as all-zero bytes without being
// written: the memory comes zero-filled from huge_page_allocator (calloc, or
// a fresh mapping on transparent huge pages), so a large table costs nothing
// until it is used and its pages fault in only where it is touched.
//
// For element types whose all-zero bytes are a valid value and which need no
// constructor or destructor run (implicit-lifetime, trivially destructible):
// the elements come into being with the storage. Owns its memory; move-only.

#include "runtime/huge_page_allocator.hpp"

#include <cstddef>
#include <type_traits>
#include <utility>

namespace kvtier {

template <class T>
class zeroed_array {
  static_assert(std::is_trivially_destructible_v<T> && std::is_trivially_copyable_v<T>,
                "zeroed_array holds plain data whose all-zero bytes are a value");

public:
  zeroed_array() = default;
  explicit zeroed_array(size_t n) : data_(n ? huge_page_allocator<T>{}.allocate(n) : nullptr), size_(n) {}
  zeroed_array(zeroed_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  zeroed_array& operator=(zeroed_array&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  zeroed_array(const zeroed_array&) = delete;
  zeroed_array& operator=(const zeroed_array&) = delete;
  ~zeroed_array() { release(); }

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }

private:
  void release() {
    if (data_)
      huge_page_allocator<T>{}.deallocate(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

} // namespace kvtier
