// _snowflake: the compiled half of the Python module `snowflake` (snowflake/__init__.py
// is the other half: the exception classes, the named tuples and the time conversions).
//
// A Python Client wraps one snowflake::Client. Every call that may wait (Open, a take on
// an empty ring, status's control-socket request) runs with the GIL released, so other
// Python threads run meanwhile and several threads take from one Client in parallel, as
// the C++ Client allows. The errors the library returns become the exception classes
// snowflake/__init__.py registers (_register_errors), each carrying the library's code
// and message.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "libclient/status/status_report.h"
#include "protocol/control_client.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"
#include "snowflake/snowflake.h"

namespace py = pybind11;

namespace {

// A batch larger than this is refused: 16 M IDs are 128 MiB, beyond any sensible request.
constexpr int64_t kMaxBatch = int64_t{1} << 24;

// {code name: exception class}, set once by snowflake/__init__.py. Never destroyed: it
// must outlive every module object during interpreter shutdown.
py::dict& ErrorClasses() {
  static auto* classes = new py::dict();
  return *classes;
}

// Raises the registered class for `code` ("daemon_paused", ...) with the library's
// message; RuntimeError before registration (only if __init__.py was bypassed).
[[noreturn]] void Raise(std::string_view code, int status, const std::string& message) {
  py::dict& classes = ErrorClasses();
  const py::str key(code.data(), code.size());
  if (!classes.contains(key)) throw std::runtime_error(message);
  const py::object error = classes[key](message, key, status);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

// sf_status numbers ClientError values from 1 in the same order (snowflake.h), so a
// Python exception's `status` is the C ABI's value.
[[noreturn]] void Raise(const snowflake::Error& error) {
  Raise(snowflake::ClientErrorName(error.code), static_cast<int>(error.code) + 1,
        error.message);
}

[[noreturn]] void RaiseInvalidArgument(const std::string& message) {
  Raise(sf_status_str(SF_INVALID_ARGUMENT), SF_INVALID_ARGUMENT, message);
}

class PyClient {
 public:
  PyClient(const std::string& service, std::optional<std::string> runtime_dir,
           std::optional<std::vector<std::string>> remotes, std::optional<double> timeout,
           std::optional<std::string> remotes_ca, std::optional<std::string> remotes_cert,
           std::optional<std::string> remotes_key, std::optional<double> max_heartbeat_age) {
    if (runtime_dir) {
      if (runtime_dir->empty()) {
        RaiseInvalidArgument(
            "runtime_dir is empty: give the daemon's runtime directory, or None for the "
            "default ($SNOWFLAKE_RUNTIME_DIR, else /run/snowflaked)");
      }
      options_.runtime_dir = *runtime_dir;
    }
    if (remotes) {
      // Given, even empty: these remotes and no others ($SNOWFLAKE_REMOTES is not read).
      options_.remotes = *remotes;
      options_.remotes_from_environment = false;
    }
    if (remotes_ca) options_.remotes_ca_file = *remotes_ca;
    if (remotes_cert) options_.remotes_cert_file = *remotes_cert;
    if (remotes_key) options_.remotes_key_file = *remotes_key;
    if (timeout) {
      // Also false for NaN.
      if (!(*timeout >= 0 && *timeout <= 3600)) {
        RaiseInvalidArgument("timeout must be between 0 and 3600 seconds (or None for 0.1 s), not " +
                             std::to_string(*timeout));
      }
      options_.wait_timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000));
    }
    if (max_heartbeat_age) {
      // Also false for NaN. 0: the daemon's own liveness setting, as None.
      if (!(*max_heartbeat_age >= 0 && *max_heartbeat_age <= 3600)) {
        RaiseInvalidArgument(
            "max_heartbeat_age must be between 0 and 3600 seconds (or None for the daemon's "
            "own liveness setting), not " +
            std::to_string(*max_heartbeat_age));
      }
      options_.max_heartbeat_age =
          std::chrono::milliseconds(static_cast<int64_t>(*max_heartbeat_age * 1000));
    }
    tl::expected<snowflake::Client, snowflake::Error> opened = [&] {
      py::gil_scoped_release unlocked;
      return snowflake::Client::Open(service, options_);
    }();
    if (!opened) Raise(opened.error());
    client_.emplace(std::move(*opened));
    owner_pid_ = getpid();
  }

  uint64_t Next() {
    InFlight call(*this);
    tl::expected<uint64_t, snowflake::Error> id = [&] {
      py::gil_scoped_release unlocked;
      return client_->Next();
    }();
    if (!id) Raise(id.error());
    return *id;
  }

  // n IDs, strictly increasing, in an array('Q'): no Python object per ID. The ring may
  // hold fewer than n at an instant (a short batch); this takes again until it has n. An
  // error after some IDs were taken returns those (1 to n-1 of them: taken IDs are never
  // thrown away), and the next call meets the error; an error before any raises.
  py::object NextBatch(int64_t n) {
    if (n < 1 || n > kMaxBatch) {
      RaiseInvalidArgument("next_batch: n must be between 1 and " + std::to_string(kMaxBatch) +
                           ", not " + std::to_string(n));
    }
    InFlight call(*this);
    PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n * 8));
    if (raw == nullptr) throw py::error_already_set();
    const auto buffer = py::reinterpret_steal<py::bytes>(raw);
    auto* ids = reinterpret_cast<uint64_t*>(PyBytes_AS_STRING(raw));
    std::optional<snowflake::Error> failed;
    size_t got = 0;
    {
      py::gil_scoped_release unlocked;
      while (got < static_cast<size_t>(n)) {
        auto taken = client_->NextBatch(std::span<uint64_t>(ids + got, static_cast<size_t>(n) - got));
        if (!taken) {
          failed = std::move(taken.error());
          break;
        }
        got += *taken;
      }
    }
    if (failed && got == 0) Raise(*failed);
    static auto* array_type = new py::object(py::module_::import("array").attr("array"));
    if (got < static_cast<size_t>(n)) {
      return (*array_type)("Q",
                           py::bytes(PyBytes_AS_STRING(raw), static_cast<Py_ssize_t>(got * 8)));
    }
    return (*array_type)("Q", buffer);
  }

  // The object `snowflakectl status --json` prints for this client's runtime directory,
  // plus client_taken (IDs this Client took), as JSON text (__init__.py parses it).
  std::string Status() {
    InFlight call(*this);
    snowflake::status::StatusReport report;
    std::optional<snowflake::Error> failed;
    {
      py::gil_scoped_release unlocked;
      auto segment = client_->GetStatus();
      if (!segment) {
        failed = std::move(segment.error());
      } else {
        report.segment = std::move(*segment);
        const std::filesystem::path dir = options_.runtime_dir.empty()
                                              ? snowflake::DefaultRuntimeDir()
                                              : options_.runtime_dir;
        report.runtime_dir = dir.string();
        snowflake::status::SetDaemonAnswer(
            report, snowflake::protocol::QueryStatus(dir, std::chrono::seconds(2)));
        report.now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      }
    }
    if (failed) Raise(*failed);
    nlohmann::json out = snowflake::status::StatusToJson(report);
    out["client_taken"] = report.segment.client_taken;
    return out.dump();
  }

  py::tuple Decode(uint64_t id) {
    InFlight call(*this);
    auto fields = client_->Decode(id);
    if (!fields) Raise(fields.error());
    return py::make_tuple(fields->unix_ms, fields->machine, fields->sequence);
  }

  int64_t epoch_unix_ms() {
    InFlight call(*this);
    return client_->layout().epoch_unix_ms();
  }

  std::string service() {
    InFlight call(*this);
    return client_->service();
  }

  bool closed() const { return !client_.has_value(); }

  // Idempotent. Calls already running on other threads finish first (they hold no GIL,
  // so this waits without it). In a forked child the parent's other threads do not
  // exist, so their calls are not waited for.
  void Close() {
    if (!client_) return;
    closing_ = true;
    if (getpid() == owner_pid_) {
      py::gil_scoped_release unlocked;
      while (in_flight_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
    client_.reset();
  }

 private:
  // Marks a call in progress. Checked and counted with the GIL held, as Close sets
  // closing_ with it held: a call that got past the check is counted before Close looks.
  class InFlight {
   public:
    explicit InFlight(PyClient& owner) : owner_(owner) {
      if (owner.closing_) RaiseInvalidArgument("the client is closed: open a new one");
      owner_.in_flight_.fetch_add(1, std::memory_order_relaxed);
    }
    ~InFlight() { owner_.in_flight_.fetch_sub(1, std::memory_order_release); }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    PyClient& owner_;
  };

  snowflake::ClientOptions options_;
  std::optional<snowflake::Client> client_;
  std::atomic<int> in_flight_{0};
  bool closing_ = false;
  pid_t owner_pid_ = 0;
};

// Raises the registered class for an sf_* status (module-level calls use the C ABI, which
// needs no Client).
[[noreturn]] void RaiseStatus(sf_status status) {
  Raise(sf_status_str(status), static_cast<int>(status), sf_last_error());
}

}  // namespace

PYBIND11_MODULE(_snowflake, m) {
  m.doc() = "The compiled half of the snowflake module; import snowflake instead.";
  m.attr("DEFAULT_EPOCH_UNIX_MS") = snowflake::kDefaultEpochUnixMs;

  m.def("_register_errors", [](const py::dict& classes) { ErrorClasses() = classes; });
  // Every error status with its code (sf_status_str, the vocabulary's) and its action
  // (sf_status_action: "fail_over", ...), so the tests can check that __init__.py maps
  // each to its exception class, and that exactly the fail-over codes are UnavailableError.
  // SF_RING_EMPTY is the last status (snowflake.h appends new ones).
  m.def("_error_codes", [] {
    py::list codes;
    for (int s = SF_INVALID_SERVICE_NAME; s <= SF_RING_EMPTY; ++s) {
      const auto status = static_cast<sf_status>(s);
      codes.append(
          py::make_tuple(s, sf_status_str(status), sf_action_str(sf_status_action(status))));
    }
    return codes;
  });

  py::class_<PyClient>(m, "_Client")
      .def(py::init<const std::string&, std::optional<std::string>,
                    std::optional<std::vector<std::string>>, std::optional<double>,
                    std::optional<std::string>, std::optional<std::string>,
                    std::optional<std::string>, std::optional<double>>(),
           py::arg("service"), py::arg("runtime_dir") = py::none(), py::arg("remotes") = py::none(),
           py::arg("timeout") = py::none(), py::arg("remotes_ca") = py::none(),
           py::arg("remotes_cert") = py::none(), py::arg("remotes_key") = py::none(),
           py::arg("max_heartbeat_age") = py::none())
      .def("next", &PyClient::Next)
      .def("next_batch", &PyClient::NextBatch, py::arg("n"))
      .def("_status_json", &PyClient::Status)
      .def("_decode", &PyClient::Decode, py::arg("id"))
      .def("close", &PyClient::Close)
      .def_property_readonly("epoch_unix_ms", &PyClient::epoch_unix_ms)
      .def_property_readonly("service", &PyClient::service)
      .def_property_readonly("closed", &PyClient::closed);

  // (unix_ms, machine, sequence) of id with the epoch epoch_unix_ms in `layout` (a preset
  // or "T/M/S", as snowflaked's [id] layout), through sf_parse_layout and sf_decode_in.
  m.def("_decode", [](uint64_t id, int64_t epoch_unix_ms, const std::string& layout) {
    sf_id_bits bits;
    if (const sf_status status = sf_parse_layout(layout.c_str(), &bits); status != SF_OK) {
      RaiseStatus(status);
    }
    sf_decoded_id fields;
    if (const sf_status status = sf_decode_in(&bits, epoch_unix_ms, id, &fields); status != SF_OK) {
      RaiseStatus(status);
    }
    return py::make_tuple(fields.unix_ms, fields.machine, fields.sequence);
  });
  // (first_id, last_id, first_unix_ms, last_unix_ms) in `layout`, as sf_bounds_in.
  m.def("_bounds", [](int64_t epoch_unix_ms, int64_t from_unix_ms, int64_t to_unix_ms,
                      const std::string& layout) {
    sf_id_bits bits;
    if (const sf_status status = sf_parse_layout(layout.c_str(), &bits); status != SF_OK) {
      RaiseStatus(status);
    }
    sf_id_bounds bounds;
    if (const sf_status status =
            sf_bounds_in(&bits, epoch_unix_ms, from_unix_ms, to_unix_ms, &bounds);
        status != SF_OK) {
      RaiseStatus(status);
    }
    return py::make_tuple(bounds.first_id, bounds.last_id, bounds.first_unix_ms,
                          bounds.last_unix_ms);
  });
  // Unix ms of an RFC 3339 date-time or a Unix-ms text, as sf_parse_time.
  m.def("_parse_time", [](const std::string& text) {
    int64_t unix_ms = 0;
    if (const sf_status status = sf_parse_time(text.c_str(), &unix_ms); status != SF_OK) {
      RaiseStatus(status);
    }
    return unix_ms;
  });
}
