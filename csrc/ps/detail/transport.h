#pragma once
// The gRPC settings of a parameter-server connection, shared by both ends, and the opening of
// a worker's channel over a server's local transport (a Unix-domain socket, see
// LocalTransportAddress in endpoint.h).
//
// Why a local transport: on one host, a worker and a server exchange the 1.7 MB dense gradient
// and values every step. Over loopback TCP each message goes through the TCP stack twice
// (segmentation into 64 KB skbs, ACKs, the softirq that delivers them, window updates), besides
// the two copies through the kernel that any socket makes. A Unix stream socket makes the same
// two copies and hands the buffer straight to the peer's receive queue, with no protocol work,
// so it costs less CPU per byte; the gRPC protocol above it is unchanged. Measured
// (benchmarks/ps_local_transport.py, CPU of both processes per 1.7 MB push + pull): 9-16% less
// than TCP. Part of the gain is given back: a Unix socket's send buffer is
// net.core.wmem_default (208 KB) where loopback TCP grows to 4 MB, so a 1.7 MB message crosses
// in about 27 writes against 4 (strace), with three times the wakeups; gRPC has no public
// argument to raise it.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/time/time.h"

namespace fleet::ps::detail {

// The channel arguments of a worker's channels: unlimited message sizes and a quick reconnect.
//
// gRPC's defaults are kept for the rest. Tried on both ends against them for 1.7 MB dense
// pushes and pulls (benchmarks/ps_local_transport.py, CPU per round trip of both processes,
// 3 alternating rounds each, loaded machine): an HTTP/2 max frame size of 16 MB instead of
// 16 KB, within the run-to-run noise (-9% against a 10% spread of two baseline runs); read
// chunks of 1-8 MB instead of gRPC's adaptive 8 KB to 4 MB, 25% fewer recvmsg calls (strace
// -c) but within the noise in CPU; a 8 MB HTTP/2 write buffer, within the noise; BDP probing off
// with a 64 MB flow-control window, +25% CPU and twice the wall time. Compression is off by
// default and stays so.
grpc::ChannelArguments WorkerChannelArguments();

// A channel to `address` (a unix: or unix-abstract: target) once it is READY, or nullptr when
// it fails to connect (nothing listens there) or is not READY by `deadline`. Blocks.
std::shared_ptr<grpc::Channel> ConnectLocal(const std::string& address,
                                            const grpc::ChannelArguments& args,
                                            absl::Time deadline);

}  // namespace fleet::ps::detail
