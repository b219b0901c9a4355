#pragma once
// The names a checkpoint save is known by on both sides of the wire: the save id a client picks
// and every server writes its parts under, and the checkpoint directory. Where the parts go in
// that directory, and the manifest, are table/checkpoint.h's business.

#include <string>

#include "absl/status/status.h"

namespace fleet::ps {

// A fresh save id: UTC time, then 64 random bits ("20240521T101530Z-3f9c2a0b1d4e5f60").
std::string NewSaveId();
// InvalidArgument unless `save_id` is 1 to 64 letters, digits, '-' or '_' (it names a directory).
absl::Status CheckSaveId(const std::string& save_id);
// InvalidArgument naming `what` when `dirname` is empty.
absl::Status CheckDirname(const std::string& dirname, const char* what);

}  // namespace fleet::ps
