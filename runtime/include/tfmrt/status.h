// Status values returned across the runtime API. The runtime never throws across its API.
#pragma once

#include <string>
#include <utility>

namespace tfmrt {

// ResourceExhausted: memory ran out (callers add which option to lower).
enum class StatusCode { Ok = 0, InvalidArgument, NotFound, DataLoss, Unimplemented, Internal, IoError, ResourceExhausted };

class Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }
  bool ok() const { return code_ == StatusCode::Ok; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }
  // "error: <message>"-style text for CLIs.
  std::string toString() const { return ok() ? std::string("ok") : message_; }

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

inline Status invalidArgument(std::string m) { return {StatusCode::InvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {StatusCode::NotFound, std::move(m)}; }
inline Status dataLoss(std::string m) { return {StatusCode::DataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::Unimplemented, std::move(m)}; }
inline Status internalError(std::string m) { return {StatusCode::Internal, std::move(m)}; }
inline Status ioError(std::string m) { return {StatusCode::IoError, std::move(m)}; }
inline Status outOfMemory(std::string m) { return {StatusCode::ResourceExhausted, std::move(m)}; }

}  // namespace tfmrt

#define TFMRT_RETURN_IF_ERROR(expr)                                                             \
  do {                                                                                          \
    ::tfmrt::Status _tfmrt_status = (expr);                                                     \
    if (!_tfmrt_status.ok()) return _tfmrt_status;                                              \
  } while (0)
