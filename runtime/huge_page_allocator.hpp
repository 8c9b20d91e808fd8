#pragma once
// An allocator for large tables that are read at random (hash indexes):
// allocations of 2 MiB or more are 2 MiB aligned and marked for transparent
// huge pages, so a lookup costs a cache miss instead of a cache miss plus a
// page-table walk. Where the kernel declines, they are ordinary pages.
//
// Memory comes zero-filled (calloc below 2 MiB, fresh anonymous mappings
// above): runtime/zeroed_array.hpp builds tables on that without writing them,
// so their pages fault in only where they are used.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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
      if (void* p = std::calloc(n, sizeof(T)))
        return static_cast<T*>(p);
      throw std::bad_alloc{};
    }
    // Map a huge page more than asked, keep the 2 MiB-aligned part, give the rest back.
    size_t rounded = mapped_bytes(bytes);
    void* raw = mmap(nullptr, rounded + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
      throw std::bad_alloc{};
    auto start = reinterpret_cast<uintptr_t>(raw);
    auto aligned = (start + huge_page - 1) & ~(uintptr_t{huge_page} - 1);
    if (aligned > start)
      munmap(raw, aligned - start);
    if (size_t tail = start + huge_page - aligned; tail > 0)
      munmap(reinterpret_cast<void*>(aligned + rounded), tail);
    madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE); // advice only: failure leaves small pages
    return reinterpret_cast<T*>(aligned);
  }
  void deallocate(T* p, size_t n) noexcept {
    size_t bytes = n * sizeof(T);
    if (bytes < huge_page)
      std::free(p);
    else
      munmap(p, mapped_bytes(bytes));
  }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }

private:
  static size_t mapped_bytes(size_t bytes) { return (bytes + huge_page - 1) / huge_page * huge_page; }
};

} // namespace kvtier
