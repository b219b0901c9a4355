# Parameter-server fuzz targets, included by CMakeLists.txt (whose compile options add the
# sanitizers and coverage): ps_service_fuzz (every PsService handler, in process) and
# ps_checkpoint_fuzz (the part-file reader and the checkpoint manifest). Seeds in
# corpus/ps_service and corpus/ps_checkpoint.
#
# They link the product's own server target (csrc/ps/CMakeLists.txt), built here with the
# sanitizers; this file gives it what the top-level CMakeLists.txt gives it in the product build.
find_package(Protobuf REQUIRED)
set(FLEET_PROTO_OUT "${CMAKE_CURRENT_BINARY_DIR}/proto")
set(FLEET_PACKAGE_DIR "${CMAKE_CURRENT_BINARY_DIR}/python")  # ps_pb2.py, unused here
# fuzz_sources holds the core sources the engine reaches (huge-page advice for its row slabs).
add_library(fleet_core ALIAS fuzz_sources)
add_subdirectory("${FLEET_SRC}/ps" ps EXCLUDE_FROM_ALL)

foreach(target ps_service_fuzz ps_checkpoint_fuzz)
  add_executable(${target} "${CMAKE_CURRENT_SOURCE_DIR}/${target}.cc")
  target_link_libraries(${target} PRIVATE fleet_ps_server)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
endforeach()
