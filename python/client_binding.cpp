// _kvtier.Client: kvtierd's C++ client (client/) for Python. Keys arrive
// packed, 16 bytes each (little-endian lo, then hi, as kvtier/keys.py makes
// them); blocks are named by their offset in the one shared-memory region,
// which Python sees through the buffer protocol (_kvtier.Region). The
// GIL is released for every round trip to the daemon.
//
// Invariants: a Region keeps its Client alive (so the mapping outlives every
// view of it), and a Client maps at most one region (replacing it would unmap
// pages that numpy arrays or tensors may still view).

#include "client/client.hpp"
#include "python/bindings.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace kvtier::python {
namespace {

constexpr std::size_t key_bytes = 16;

template <class T>
T value_or_raise(client::result<T>&& r) {
  if (!r)
    throw error(r.err().what());
  return std::move(*r);
}

std::vector<client::block_key> keys_of(const py::bytes& packed) {
  std::string_view text = packed;
  if (text.size() % key_bytes)
    throw error("keys: expected 16 bytes per key, got " + std::to_string(text.size()) + " bytes");
  std::vector<client::block_key> keys(text.size() / key_bytes);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    unsigned char b[key_bytes];
    std::memcpy(b, text.data() + i * key_bytes, key_bytes);
    for (int j = 7; j >= 0; --j) {
      keys[i].lo = (keys[i].lo << 8) | b[j];
      keys[i].hi = (keys[i].hi << 8) | b[8 + j];
    }
  }
  return keys;
}

struct region_view {
  py::object owner; // the Client: keeps the mapping alive
  client::region* region;
};

py::list bools(const std::vector<bool>& v) {
  py::list out;
  for (bool b : v)
    out.append(b);
  return out;
}

} // namespace

void bind_client(py::module_& m) {
  py::class_<region_view>(m, "Region", py::buffer_protocol())
      .def_buffer([](region_view& r) {
        return py::buffer_info(r.region->data(), 1, py::format_descriptor<unsigned char>::format(), 1,
                               {static_cast<py::ssize_t>(r.region->size())}, {py::ssize_t{1}}, false);
      })
      .def("__len__", [](const region_view& r) { return r.region->size(); });

  py::class_<client::client>(m, "Client")
      .def(py::init(
               [](const std::string& endpoint, const std::string& tenant, const std::string& token, int timeout_ms) {
                 client::connect_options o{endpoint, tenant, token, timeout_ms};
                 py::gil_scoped_release unlocked;
                 return value_or_raise(client::client::connect(o));
               }),
           py::arg("endpoint"), py::arg("tenant") = "", py::arg("token") = "", py::arg("timeout_ms") = 10'000)
      .def_property_readonly("block_bytes", &client::client::block_bytes)
      .def("map_region",
           [](py::object self, std::size_t bytes) {
             auto& c = self.cast<client::client&>();
             if (c.mapped_region())
               throw error("map_region: this client has mapped its region already; a second would unmap memory "
                           "that views may still use (open another Client)");
             client::region* r = nullptr;
             {
               py::gil_scoped_release unlocked;
               r = value_or_raise(c.map_region(bytes));
             }
             return region_view{self, r};
           })
      .def("batch_exists",
           [](client::client& c, const py::bytes& packed) {
             auto keys = keys_of(packed);
             py::gil_scoped_release unlocked;
             return value_or_raise(c.batch_exists(keys));
           })
      .def("batch_get",
           [](client::client& c, const py::bytes& packed, const std::vector<std::uint64_t>& offsets) {
             auto keys = keys_of(packed);
             std::vector<bool> found;
             {
               py::gil_scoped_release unlocked;
               found = value_or_raise(c.batch_get(keys, offsets));
             }
             return bools(found);
           })
      .def("batch_set",
           [](client::client& c, const py::bytes& packed, const std::vector<std::uint64_t>& offsets) {
             auto keys = keys_of(packed);
             std::vector<bool> stored;
             {
               py::gil_scoped_release unlocked;
               stored = value_or_raise(c.batch_set(keys, offsets));
             }
             return bools(stored);
           })
      .def("pin",
           [](client::client& c, const py::bytes& packed) {
             auto keys = keys_of(packed);
             py::gil_scoped_release unlocked;
             return value_or_raise(c.pin(keys));
           })
      .def("release",
           [](client::client& c, const py::bytes& packed) {
             auto keys = keys_of(packed);
             py::gil_scoped_release unlocked;
             return value_or_raise(c.release(keys));
           })
      .def("stats", [](client::client& c) {
        client::daemon_stats s;
        {
          py::gil_scoped_release unlocked;
          s = value_or_raise(c.stats());
        }
        py::dict d;
        d["block_bytes"] = s.block_bytes;
        d["tenant_blocks"] = s.tenant_blocks;
        d["tenant_quota_blocks"] = s.tenant_quota_blocks;
        d["tenant_pinned"] = s.tenant_pinned;
        d["tenant_hits"] = s.tenant_hits;
        d["tenant_misses"] = s.tenant_misses;
        d["dram_blocks"] = s.dram_blocks;
        d["dram_capacity_blocks"] = s.dram_capacity_blocks;
        d["nvme_blocks"] = s.nvme_blocks;
        d["nvme_capacity_blocks"] = s.nvme_capacity_blocks;
        d["evictions"] = s.evictions;
        d["sessions"] = s.sessions;
        return d;
      });
}

} // namespace kvtier::python
