#pragma once
// gRPC metadata every parameter-server call carries, apart from the request messages so that
// any method (raw calls too) is covered:
//   kJobIdKey        client -> server: the caller's job identity (fleet.role_maker's job_id); a
//                    server of another job refuses the call before it reaches a table.
//   kIncarnationKey  server -> client (initial metadata of every reply): an id drawn when the
//                    server started; a client that sees it change knows the server restarted
//                    and lost the job's tables.

namespace fleet::ps::detail {

inline constexpr char kJobIdKey[] = "fleet-job-id";
inline constexpr char kIncarnationKey[] = "fleet-incarnation";

}  // namespace fleet::ps::detail
