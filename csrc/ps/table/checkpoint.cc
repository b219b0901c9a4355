#include "ps/table/checkpoint.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/table/table_file.h"

namespace fleet::ps {
namespace {

namespace fs = std::filesystem;

constexpr char kSavePrefix[] = "ps-";
// A manifest larger than this is no manifest of ours (a save lists a few entries per table).
constexpr uintmax_t kMaxManifestBytes = uintmax_t{64} << 20;

const char* ModeName(proto::SaveMode mode) {
  switch (mode) {
    case proto::DELTA:
      return "delta";
    case proto::VALUES:
      return "values-only";
    default:
      return "base";
  }
}
const char* TypeName(proto::TableType type) { return type == proto::SPARSE ? "sparse" : "dense"; }

absl::Status WriteFileSynced(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(err)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return absl::InternalError(absl::StrCat("cannot sync ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Makes a rename in `dir` durable.
void SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// The files of one table in a commit request, indexed by server; checked complete.
absl::StatusOr<proto::CheckpointSave> TableSave(
    const proto::CommitSaveRequest& request, uint32_t table_id,
    const std::vector<const proto::CheckpointFile*>& files) {
  const uint32_t n = request.num_servers();
  proto::CheckpointSave save;
  save.set_save_id(request.save_id());
  save.set_num_servers(n);
  // Bounded by the parts listed before anything is sized by the count (found by
  // ps_service_fuzz: a request claiming 2^32 servers).
  if (files.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("commit of save ", request.save_id(), ": table ",
                                                   table_id, " has ", files.size(), " parts for ",
                                                   n, " servers"));
  }
  std::vector<const proto::CheckpointFile*> by_server(n, nullptr);
  const proto::CheckpointFile& first = *files.front();
  for (const proto::CheckpointFile* f : files) {
    if (f->server_index() >= n || f->num_servers() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "commit of save ", request.save_id(), ": table ", table_id, " has a part of server ",
          f->server_index(), " of ", f->num_servers(), ", the save has ", n, " servers"));
    }
    if (by_server[f->server_index()] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("commit of save ", request.save_id(), ": table ", table_id,
                       " has two parts of server ", f->server_index()));
    }
    if (f->type() != first.type() || f->dim() != first.dim() || f->mode() != first.mode()) {
      return absl::InvalidArgumentError(absl::StrCat("commit of save ", request.save_id(),
                                                     ": the parts of table ", table_id,
                                                     " disagree on type, dim or mode"));
    }
    const std::string expected =
        PartPath(request.save_id(), table_id, f->server_index(), n, f->mode() == proto::DELTA);
    if (f->path() != expected) {
      return absl::InvalidArgumentError(absl::StrCat("commit of save ", request.save_id(),
                                                     ": part '", f->path(), "' should be '",
                                                     expected, "'"));
    }
    std::error_code ec;
    const fs::path full = fs::path(request.dirname()) / f->path();
    const uintmax_t size = fs::file_size(full, ec);
    if (ec || size != f->bytes()) {
      return absl::DataLossError(absl::StrCat(
          "commit of save ", request.save_id(), ": part ", full.string(),
          ec ? absl::StrCat(" is missing (", ec.message(), ")")
             : absl::StrCat(" holds ", size, " bytes, its server wrote ", f->bytes())));
    }
    by_server[f->server_index()] = f;
  }
  for (uint32_t s = 0; s < n; ++s) {
    if (by_server[s] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("commit of save ", request.save_id(),
                                                     ": no part of table ", table_id,
                                                     " from server ", s, " of ", n));
    }
    *save.add_files() = *by_server[s];
  }
  save.set_mode(first.mode());
  return save;
}

// Merges the saves of one commit into `manifest`.
absl::Status Merge(const proto::CommitSaveRequest& request, proto::CheckpointManifest* manifest) {
  std::map<uint32_t, std::vector<const proto::CheckpointFile*>> by_table;
  for (const auto& f : request.files()) by_table[f.table_id()].push_back(&f);
  if (by_table.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("commit of save ", request.save_id(), ": no parts"));
  }
  for (const auto& [table_id, files] : by_table) {
    auto save = TableSave(request, table_id, files);
    if (!save.ok()) return save.status();
    const proto::CheckpointFile& first = save->files(0);
    proto::CheckpointTable* table = nullptr;
    for (auto& t : *manifest->mutable_tables()) {
      if (t.table_id() == table_id) table = &t;
    }
    if (table == nullptr) {
      table = manifest->add_tables();
      table->set_table_id(table_id);
    } else if (save->mode() == proto::DELTA &&
               (table->type() != first.type() || table->dim() != first.dim())) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta save of ", TypeName(first.type()), " table ", table_id, " (dim ",
                       first.dim(), ") onto a ", TypeName(table->type()), " table of dim ",
                       table->dim(), " in ", request.dirname(), "; make a base save first"));
    }
    if (save->mode() != proto::DELTA) table->clear_saves();  // base and values saves
    table->set_type(first.type());
    table->set_dim(first.dim());
    *table->add_saves() = std::move(*save);
  }
  std::sort(manifest->mutable_tables()->begin(), manifest->mutable_tables()->end(),
            [](const auto& a, const auto& b) { return a.table_id() < b.table_id(); });
  manifest->set_format_version(kManifestVersion);
  manifest->set_last_save_id(request.save_id());
  return absl::OkStatus();
}

// Removes what `manifest` does not name: ps-* directories of other saves, table directories of
// saves it names for other tables, temporary files. Best effort: what stays is retried at the
// next commit and never loaded (loads go by the manifest).
void RemoveUnnamed(const std::string& dirname, const proto::CheckpointManifest& manifest) {
  std::set<std::pair<std::string, std::string>> named;  // (save dir, table dir)
  for (const auto& table : manifest.tables()) {
    for (const auto& save : table.saves()) {
      named.emplace(kSavePrefix + save.save_id(), absl::StrCat("table_", table.table_id()));
    }
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dirname, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, absl::StrCat(kManifestName, ".tmp-"))) {
      fs::remove(entry.path(), ec);
      continue;
    }
    if (!absl::StartsWith(name, kSavePrefix) || CheckSaveId(name.substr(3)).ok() == false ||
        !entry.is_directory(ec)) {
      continue;
    }
    auto it = named.lower_bound({name, ""});
    if (it == named.end() || it->first != name) {
      fs::remove_all(entry.path(), ec);
      continue;
    }
    for (const auto& table_dir : fs::directory_iterator(entry.path(), ec)) {
      const std::string table_name = table_dir.path().filename().string();
      if (!named.count({name, table_name})) {
        fs::remove_all(table_dir.path(), ec);
        continue;
      }
      for (const auto& file : fs::directory_iterator(table_dir.path(), ec)) {
        if (absl::StrContains(file.path().filename().string(), ".tmp-")) {
          fs::remove(file.path(), ec);
        }
      }
    }
  }
}

// One part of a save, checked against its manifest entry.
absl::Status CheckPart(const std::string& dirname, const proto::CheckpointTable& table,
                       const proto::CheckpointSave& save, uint32_t server,
                       std::vector<std::string>* paths) {
  const proto::CheckpointFile& f = save.files(server);
  const std::string where = absl::StrCat("checkpoint ", dirname, ": table ", table.table_id(), ", ",
                                         ModeName(save.mode()), " save ", save.save_id());
  const std::string expected = PartPath(save.save_id(), table.table_id(), server,
                                        save.num_servers(), save.mode() == proto::DELTA);
  if (f.server_index() != server || f.path() != expected || f.table_id() != table.table_id()) {
    return absl::DataLossError(absl::StrCat(where, ": manifest entry ", server, " names '",
                                            f.path(), "' (server ", f.server_index(), ", table ",
                                            f.table_id(), "), expected '", expected, "'"));
  }
  const std::string path = (fs::path(dirname) / f.path()).string();
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat(where, ": part of server ", server, " of ",
                                            save.num_servers(), " ", path, " is missing"));
  }
  if (size != f.bytes()) {
    return absl::DataLossError(absl::StrCat(where, ": ", path, " holds ", size,
                                            " bytes, the manifest says ", f.bytes(),
                                            " (truncated or replaced)"));
  }
  auto header = ReadTableFileHeader(path);
  if (!header.ok()) return header.status();
  if (header->checksum != f.crc32() || header->row_count != f.rows()) {
    return absl::DataLossError(absl::StrCat(
        where, ": ", path, " has checksum ", header->checksum, " and ", header->row_count,
        " rows, the manifest says ", f.crc32(), " and ", f.rows(), " (a part of another save)"));
  }
  if (header->table_id != table.table_id() || header->dim != table.dim() ||
      header->table_type != static_cast<uint32_t>(table.type())) {
    return absl::DataLossError(absl::StrCat(where, ": ", path, " holds table ", header->table_id,
                                            " of dim ", header->dim, ", the manifest table ",
                                            table.table_id(), " of dim ", table.dim()));
  }
  paths->push_back(path);
  return absl::OkStatus();
}

}  // namespace

std::string PartPath(const std::string& save_id, uint32_t table_id, uint32_t server_index,
                     uint32_t num_servers, bool delta) {
  return absl::StrCat(kSavePrefix, save_id, "/table_", table_id, "/part-", server_index, "-of-",
                      num_servers, delta ? ".delta" : ".base");
}

absl::StatusOr<proto::CheckpointManifest> ReadManifest(const std::string& dirname) {
  if (auto s = CheckDirname(dirname, "load"); !s.ok()) return s;
  const std::string path = (fs::path(dirname) / kManifestName).string();
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    const bool dir_exists = fs::is_directory(dirname, ec);
    return absl::NotFoundError(absl::StrCat(
        "no checkpoint in ", dirname, ": ",
        dir_exists ? absl::StrCat(kManifestName, " is missing (no save into it completed)")
                   : "no such directory"));
  }
  if (size > kMaxManifestBytes) {
    return absl::DataLossError(absl::StrCat(path, " holds ", size, " bytes: not a manifest"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::DataLossError(absl::StrCat("cannot read ", path));
  proto::CheckpointManifest manifest;
  auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &manifest);
  if (!parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a checkpoint manifest: ", parsed.ToString()));
  }
  if (manifest.format_version() != kManifestVersion) {
    return absl::DataLossError(absl::StrCat(path, ": format version ", manifest.format_version(),
                                            ", this build reads ", kManifestVersion));
  }
  return manifest;
}

absl::Status CommitManifest(const proto::CommitSaveRequest& request) {
  if (auto s = CheckDirname(request.dirname(), "commit"); !s.ok()) return s;
  if (auto s = CheckSaveId(request.save_id()); !s.ok()) return s;
  if (request.num_servers() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("commit of save ", request.save_id(), ": num_servers is 0"));
  }
  proto::CheckpointManifest manifest;
  auto previous = ReadManifest(request.dirname());
  if (previous.ok()) {
    manifest = std::move(*previous);
  } else if (!absl::IsNotFound(previous.status())) {
    // A damaged manifest is replaced only by a base save of every table it lists; refuse
    // rather than guess which chains to keep.
    return previous.status();
  }
  if (auto s = Merge(request, &manifest); !s.ok()) return s;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (auto s = google::protobuf::util::MessageToJsonString(manifest, &json, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the manifest: ", s.ToString()));
  }
  const std::string path = (fs::path(request.dirname()) / kManifestName).string();
  const std::string temp = absl::StrCat(path, ".tmp-", ::getpid());
  if (auto s = WriteFileSynced(temp, json); !s.ok()) {
    ::unlink(temp.c_str());
    return s;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", temp, " to ", path, ": ", strerror(err)));
  }
  SyncDirectory(request.dirname());
  RemoveUnnamed(request.dirname(), manifest);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CheckedParts(const std::string& dirname,
                                                      const proto::CheckpointManifest& manifest,
                                                      const proto::TableConfig& config) {
  const proto::CheckpointTable* table = nullptr;
  for (const auto& t : manifest.tables()) {
    if (t.table_id() == config.table_id()) table = &t;
  }
  if (table == nullptr || table->saves_size() == 0) {
    return absl::NotFoundError(
        absl::StrCat("no saved parts of table ", config.table_id(), " in checkpoint ", dirname));
  }
  if (table->type() != config.type() || table->dim() != config.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", dirname, ": table ", config.table_id(), " was saved as ",
                     TypeName(table->type()), " with dim ", table->dim(), "; this server's table ",
                     config.table_id(), " '", config.name(), "' is ", TypeName(config.type()),
                     " with dim ", config.dim()));
  }
  std::vector<std::string> paths;
  for (int i = 0; i < table->saves_size(); ++i) {
    const proto::CheckpointSave& save = table->saves(i);
    if (i > 0 && save.mode() != proto::DELTA) {
      return absl::DataLossError(absl::StrCat("checkpoint ", dirname, ": table ", table->table_id(),
                                              " has a base save after its "
                                              "first save in the manifest"));
    }
    if (auto s = CheckSaveId(save.save_id()); !s.ok()) return s;
    if (save.num_servers() == 0 || static_cast<uint32_t>(save.files_size()) != save.num_servers()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", dirname, ": table ", table->table_id(), ", save ", save.save_id(),
          " lists ", save.files_size(), " parts for ", save.num_servers(), " servers"));
    }
    for (uint32_t s = 0; s < save.num_servers(); ++s) {
      if (auto status = CheckPart(dirname, *table, save, s, &paths); !status.ok()) return status;
    }
  }
  return paths;
}

}  // namespace fleet::ps
