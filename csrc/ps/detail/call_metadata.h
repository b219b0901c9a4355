#pragma once
// gRPC metadata every parameter-server call carries, apart from the request messages so that
// any method (raw calls too) is covered:
//   kJobIdKey        client -> server: the caller's job identity (fleet.role_maker's job_id); a
//                    server of another job refuses the call before it reaches a table.
//   kIncarnationKey  server -> client (initial metadata of every reply): an id drawn when the
//                    server started; a client that sees it change knows the server restarted
//                    and lost the job's tables.
//   kLoadedFromKey   server -> client (initial metadata, only when set): the checkpoint
//                    directory the server loaded its tables from before its port opened. A
//                    client of a job that takes restarted servers (ClientOptions.
//                    server_restarts) goes on with a restarted server only when it carries it.

namespace fleet::ps::detail {

inline constexpr char kJobIdKey[] = "fleet-job-id";
inline constexpr char kIncarnationKey[] = "fleet-incarnation";
// A "-bin" key: gRPC carries any bytes of a path in it.
inline constexpr char kLoadedFromKey[] = "fleet-loaded-from-bin";

}  // namespace fleet::ps::detail
