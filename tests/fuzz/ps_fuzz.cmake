# Parameter-server fuzz targets, included by CMakeLists.txt (whose compile options add the
# sanitizers and coverage): ps_service_fuzz (every PsService handler, in process) and
# ps_checkpoint_fuzz (the part-file reader and the checkpoint manifest). Seeds in
# corpus/ps_service and corpus/ps_checkpoint.
set(PS_FUZZ_ROOT "${CMAKE_CURRENT_SOURCE_DIR}/../..")
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(absl REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(PS_FUZZ_PROTO_OUT "${CMAKE_CURRENT_BINARY_DIR}/proto/fleet/ps")
add_custom_command(
  OUTPUT "${PS_FUZZ_PROTO_OUT}/ps.pb.cc" "${PS_FUZZ_PROTO_OUT}/ps.grpc.pb.cc"
  COMMAND ${CMAKE_COMMAND} -E make_directory "${PS_FUZZ_PROTO_OUT}"
  COMMAND protobuf::protoc -I "${PS_FUZZ_ROOT}/csrc/ps" --cpp_out "${PS_FUZZ_PROTO_OUT}"
          --grpc_out "${PS_FUZZ_PROTO_OUT}" --plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN}
          "${PS_FUZZ_ROOT}/csrc/ps/ps.proto"
  DEPENDS "${PS_FUZZ_ROOT}/csrc/ps/ps.proto")

set(PS_FUZZ_SRCS checkpoint.cc dense_table.cc initializer.cc sparse_table.cc table_file.cc
    update_rule.cc detail/barrier.cc detail/grad_accumulator.cc detail/memory.cc detail/overflow_guard.cc
    detail/row_store.cc detail/run_both.cc detail/service.cc detail/table_set.cc
    detail/write_behind.cc)
list(TRANSFORM PS_FUZZ_SRCS PREPEND "${PS_FUZZ_ROOT}/csrc/ps/")
# The one core source the engine reaches (huge-page advice for its row slabs).
list(APPEND PS_FUZZ_SRCS "${PS_FUZZ_ROOT}/csrc/core/huge_pages.cc")
add_library(ps_fuzz_engine STATIC ${PS_FUZZ_SRCS} "${PS_FUZZ_PROTO_OUT}/ps.pb.cc"
            "${PS_FUZZ_PROTO_OUT}/ps.grpc.pb.cc")
target_include_directories(ps_fuzz_engine PUBLIC "${PS_FUZZ_ROOT}/csrc"
                           "${CMAKE_CURRENT_BINARY_DIR}/proto")
target_link_libraries(ps_fuzz_engine PUBLIC gRPC::grpc++ protobuf::libprotobuf ZLIB::ZLIB
  PkgConfig::LIBDEFLATE absl::flat_hash_map absl::synchronization absl::status absl::statusor absl::strings
  absl::str_format absl::time absl::span)

foreach(target ps_service_fuzz ps_checkpoint_fuzz)
  add_executable(${target} "${CMAKE_CURRENT_SOURCE_DIR}/${target}.cc")
  target_link_libraries(${target} PRIVATE ps_fuzz_engine)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
endforeach()
