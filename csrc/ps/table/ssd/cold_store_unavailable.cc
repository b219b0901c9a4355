// ColdStore in a build without RocksDB: every "ssd" table is refused at creation, naming the
// library to install. The other methods are unreachable (no store is ever opened).
#include "absl/strings/str_cat.h"
#include "ps/table/ssd/cold_store.h"

namespace fleet::ps::ssd {

struct ColdStore::Impl {};

std::string TableIdentity::Describe() const {
  return absl::StrCat("sparse table ", table_id, " '", name, "'");
}

ColdStore::ColdStore(std::string path, uint32_t width, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), width_(width), impl_(std::move(impl)) {}
ColdStore::~ColdStore() = default;

absl::Status ColdStore::Fail(const std::string& what, const std::string& detail) const {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", detail));
}

absl::StatusOr<std::unique_ptr<ColdStore>> ColdStore::Open(const std::string& path,
                                                           const TableIdentity&, uint64_t) {
  return absl::FailedPreconditionError(absl::StrCat(
      "storage \"ssd\" (ssd_path ", path,
      ") needs RocksDB, which this build of Fleet did not find: install librocksdb-dev "
      "(scripts/setup_env.sh does) and rebuild"));
}

absl::Status ColdStore::Read(uint32_t, absl::Span<const int64_t>,
                             absl::FunctionRef<void(size_t, const DiskRow&)>) {
  return Fail("read", "no RocksDB in this build");
}
absl::Status ColdStore::Write(uint32_t, absl::Span<const DiskRow>, absl::Span<const int64_t>) {
  return Fail("write", "no RocksDB in this build");
}
absl::Status ColdStore::ForEach(uint32_t, absl::FunctionRef<void(const DiskRow&)>) const {
  return Fail("read", "no RocksDB in this build");
}
absl::Status ColdStore::Clear() { return Fail("clear", "no RocksDB in this build"); }
absl::StatusOr<uint64_t> ColdStore::DropStampedBefore(uint32_t) {
  return Fail("shrink", "no RocksDB in this build");
}

}  // namespace fleet::ps::ssd
