// The extension module superkernel._comm: the MPI communicator (include/superkernel/comm.h,
// libsuperkernel_comm) and the collective graph builders, for Python programs run under mpirun
// and for the torch.compile backend's lowering of torch's functional collectives
// (superkernel/_lower_comm.py, docs/COMM.md "From PyTorch").
//
// A module of its own, built only with MPI (SK_ENABLE_MPI): `import superkernel` never loads the
// MPI library, and a build without MPI has the rest of the package. Its functions take the Graph
// and Tensor objects of superkernel._superkernel (nanobind shares bound types between modules).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "py_support.h"
#include "superkernel/comm.h"
#include "superkernel/runtime.h"

namespace skpy {
namespace {

using sk::comm::Communicator;
using sk::comm::Group;

void bind_comm(nb::module_& m) {
  using nb::arg;
  nb::class_<Group>(m, "Group", "The value a graph addresses a communicator by: (handle, rank, size).")
      .def_ro("handle", &Group::handle)
      .def_ro("rank", &Group::rank)
      .def_ro("size", &Group::size)
      .def("__repr__", [](const Group& g) {
        return "<superkernel._comm.Group rank " + std::to_string(g.rank) + " of " + std::to_string(g.size) + ">";
      });

  nb::class_<Communicator>(m, "Communicator", "The processes of MPI_COMM_WORLD (docs/COMM.md).")
      .def_static(
          "world",
          [](double watchdog_seconds) {
            sk::comm::CommOptions o;
            o.watchdog_seconds = watchdog_seconds;
            return unwrap(Communicator::world(o));
          },
          arg("watchdog_seconds") = 30.0,
          "Initialises MPI with MPI_THREAD_MULTIPLE (or checks the level a program that initialised it got).")
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def("group", &Communicator::group)
      .def(
          "load_kernels", [](const Communicator& c, sk::Runtime& runtime) { check(c.load_kernels(runtime)); },
          arg("runtime"), "Loads the collective kernels (libsk_kernels_comm.so) into `runtime`.")
      .def(
          "fail",
          [](Communicator& c, const std::string& message) {
            return c.fail(sk::Status(sk::StatusCode::kInternal, message)).message();
          },
          arg("message"),
          "This rank failed: tells every other rank once (their collectives stop with 'rank R failed: "
          "<message>'). Returns the message prefixed with 'rank R: '.")
      .def(
          "peer_failure",
          [](const Communicator& c) -> std::optional<std::pair<int32_t, std::string>> {
            auto f = c.peer_failure();
            if (!f) return std::nullopt;
            return std::make_pair(f->rank, f->message);
          },
          "(rank, message) of the first failure another rank reported, or None.");

  m.def(
      "finalize", [](bool failed) { check(sk::comm::finalize(failed)); }, arg("failed") = false,
      "MPI_Finalize when this library initialised MPI (bounded by the watchdog after a failure).");
  m.def("kernel_package_path", &sk::comm::kernel_package_path);

  m.def(
      "all_reduce",
      [](sk::Graph& g, const Group& group, sk::Tensor x, std::string name) {
        return sk::comm::all_reduce(g, group, x, std::move(name));
      },
      arg("graph"), arg("group"), arg("x"), arg("name") = "", "Elementwise sum over the ranks.");
  m.def(
      "reduce_scatter",
      [](sk::Graph& g, const Group& group, sk::Tensor x, std::string name) {
        return sk::comm::reduce_scatter(g, group, x, std::move(name));
      },
      arg("graph"), arg("group"), arg("x"), arg("name") = "", "x [n*M, ...] -> block r of the sum on rank r.");
  m.def(
      "all_gather",
      [](sk::Graph& g, const Group& group, sk::Tensor x, std::string name) {
        return sk::comm::all_gather(g, group, x, std::move(name));
      },
      arg("graph"), arg("group"), arg("x"), arg("name") = "", "x [M, ...] -> [n*M, ...]: block q from rank q.");
  m.def(
      "all_to_all",
      [](sk::Graph& g, const Group& group, sk::Tensor x, std::string name) {
        return sk::comm::all_to_all(g, group, x, std::move(name));
      },
      arg("graph"), arg("group"), arg("x"), arg("name") = "",
      "x [n*M, ...] -> [n*M, ...]: block q of x to rank q, block s of y from rank s.");
  m.def(
      "all_to_all_v",
      [](sk::Graph& g, const Group& group, sk::Tensor x, sk::Tensor send_counts, int64_t out_rows, int32_t groups,
         int32_t in_layout, int32_t out_layout, std::string name) {
        sk::comm::AllToAllV r =
            sk::comm::all_to_all_v(g, group, x, send_counts, out_rows, groups, in_layout, out_layout, std::move(name));
        return nb::make_tuple(r.y, r.recv_counts, r.group_counts);
      },
      arg("graph"), arg("group"), arg("x"), arg("send_counts"), arg("out_rows"), arg("groups") = 1,
      arg("in_layout") = static_cast<int32_t>(SK_COMM_RANK_MAJOR),
      arg("out_layout") = static_cast<int32_t>(SK_COMM_RANK_MAJOR), arg("name") = "",
      "Variable rows per rank: (y, recv_counts, group_counts).");
  m.def(
      "broadcast",
      [](sk::Graph& g, const Group& group, sk::Tensor x, int32_t root, std::string name) {
        return sk::comm::broadcast(g, group, x, root, std::move(name));
      },
      arg("graph"), arg("group"), arg("x"), arg("root"), arg("name") = "",
      "Rank `root`'s x on every rank (cuts its segment: COMMUNICATION).");
}

}  // namespace
}  // namespace skpy

NB_MODULE(_comm, m) {
  m.doc() = "superkernel's collectives over MPI (libsuperkernel_comm)";
  nanobind::set_leak_warnings(false);
  skpy::register_status_translator();
  skpy::bind_comm(m);
}
