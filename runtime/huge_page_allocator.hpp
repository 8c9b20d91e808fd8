#pragma once
// An allocator for large tables that are read at random (hash indexes):
// allocations of 2 MiB or more are 2 MiB aligned and marked for transparent
// huge pages, so a lookup costs a cache miss instead of a cache miss plus a
// page-table walk. Where the kernel declines, it is an ordinary allocation.

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace kvtier {

template <class T>
struct huge_page_allocator {
  using value_type = T;
  static constexpr size_t huge_page = size_t{2} << 20;

  huge_page_allocator() = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}

  T* allocate(size_t n) {
    size_t bytes = n * sizeof(T);
    if (bytes < huge_page) {
      if (void* p = std::malloc(bytes))
        return static_cast<T*>(p);
      throw std::bad_alloc{};
    }
    size_t rounded = (bytes + huge_page - 1) / huge_page * huge_page;
    void* p = std::aligned_alloc(huge_page, rounded);
    if (p == nullptr)
      throw std::bad_alloc{};
    madvise(p, rounded, MADV_HUGEPAGE); // advice only: failure leaves small pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }
};

} // namespace kvtier
