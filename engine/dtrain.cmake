# dtrain: the training engine (model, data, training loop, profiler) and its tools.
find_package(Threads REQUIRED)
add_library(dtrain_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/gpt.c ${CMAKE_CURRENT_LIST_DIR}/gpt_layout.c ${CMAKE_CURRENT_LIST_DIR}/gpt_acts.c ${CMAKE_CURRENT_LIST_DIR}/gpt_sp.c ${CMAKE_CURRENT_LIST_DIR}/gpt_config.c ${CMAKE_CURRENT_LIST_DIR}/gpt_cp.c ${CMAKE_CURRENT_LIST_DIR}/gpt_cp_ring.c ${CMAKE_CURRENT_LIST_DIR}/gpt_cp_a2a.c ${CMAKE_CURRENT_LIST_DIR}/grad_ranges.c ${CMAKE_CURRENT_LIST_DIR}/gpt_block.c ${CMAKE_CURRENT_LIST_DIR}/gpt_moe.c ${CMAKE_CURRENT_LIST_DIR}/gpt_moe_ep.c ${CMAKE_CURRENT_LIST_DIR}/data.c
            ${CMAKE_CURRENT_LIST_DIR}/checkpoint.c ${CMAKE_CURRENT_LIST_DIR}/checkpoint_manifest.c ${CMAKE_CURRENT_LIST_DIR}/comm.c ${CMAKE_CURRENT_LIST_DIR}/comm_nccl.c
            ${CMAKE_CURRENT_LIST_DIR}/data_parallel.c ${CMAKE_CURRENT_LIST_DIR}/data_parallel_ep.c ${CMAKE_CURRENT_LIST_DIR}/powersgd.c ${CMAKE_CURRENT_LIST_DIR}/offload.c
            ${CMAKE_CURRENT_LIST_DIR}/rng.c ${CMAKE_CURRENT_LIST_DIR}/train.c ${CMAKE_CURRENT_LIST_DIR}/group_staging.c ${CMAKE_CURRENT_LIST_DIR}/lr_schedule.c ${CMAKE_CURRENT_LIST_DIR}/train_log.c ${CMAKE_CURRENT_LIST_DIR}/profiler.c)
target_include_directories(dtrain_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(dtrain_lib PUBLIC dtengine_core dtkernels PkgConfig::JANSSON ZLIB::ZLIB Threads::Threads MPI::MPI_C ${MATH_LIB})
target_compile_definitions(dtrain_lib PUBLIC _DEFAULT_SOURCE)

add_executable(dtok ${CMAKE_CURRENT_LIST_DIR}/dtok_main.c)
target_link_libraries(dtok PRIVATE dtrain_lib)

# The bundled corpus: generated text (data/make_corpus.c), tokenized at build time.
add_executable(make_corpus ${CMAKE_SOURCE_DIR}/data/make_corpus.c)
set(DTRAIN_CORPUS_TEXT ${CMAKE_BINARY_DIR}/data/corpus.txt)
set(DTRAIN_CORPUS ${CMAKE_BINARY_DIR}/data/corpus.tok)
add_custom_command(OUTPUT ${DTRAIN_CORPUS}
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/data
                   COMMAND make_corpus ${DTRAIN_CORPUS_TEXT} 2000000
                   COMMAND dtok ${DTRAIN_CORPUS_TEXT} ${DTRAIN_CORPUS}
                   DEPENDS make_corpus dtok
                   COMMENT "Generating and tokenizing the bundled corpus")
add_custom_target(dtrain_corpus ALL DEPENDS ${DTRAIN_CORPUS})

add_executable(dtrain ${CMAKE_CURRENT_LIST_DIR}/dtrain_main.c)
target_link_libraries(dtrain PRIVATE dtrain_lib)
target_compile_definitions(dtrain PRIVATE DTRAIN_DEFAULT_DATA="${DTRAIN_CORPUS}")
add_dependencies(dtrain dtrain_corpus)

# dtrain-supervise: relaunches a failed job from its newest checkpoint.
add_executable(dtrain_supervise ${CMAKE_CURRENT_LIST_DIR}/dtrain_supervise_main.c)
set_target_properties(dtrain_supervise PROPERTIES OUTPUT_NAME dtrain-supervise)
target_link_libraries(dtrain_supervise PRIVATE PkgConfig::JANSSON)
target_compile_definitions(dtrain_supervise PRIVATE _DEFAULT_SOURCE)

# Run tracking (dtrain --run-dir): the run folder and the datasheet peaks MFU is taken against.
target_sources(dtrain_lib PRIVATE ${CMAKE_CURRENT_LIST_DIR}/run_dir.c ${CMAKE_CURRENT_LIST_DIR}/device_peak.c)
# The revision dtrain is built from, captured when CMake configures (re-run cmake after a commit
# to refresh it): `git rev-parse HEAD`, and dirty when `git diff --quiet HEAD` finds changes to
# tracked files (staged or not). "unknown" outside a git checkout.
set(DTRAIN_GIT_REVISION "unknown")
set(DTRAIN_GIT_DIRTY -1)
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  RESULT_VARIABLE _git_rc OUTPUT_VARIABLE _git_rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_git_rc EQUAL 0 AND _git_rev MATCHES "^[0-9a-f]+$")
    set(DTRAIN_GIT_REVISION ${_git_rev})
    execute_process(COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                    RESULT_VARIABLE _git_dirty ERROR_QUIET)
    if(_git_dirty EQUAL 0)
      set(DTRAIN_GIT_DIRTY 0)
    elseif(_git_dirty EQUAL 1)
      set(DTRAIN_GIT_DIRTY 1)
    endif()
  endif()
endif()
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/run_dir.c APPEND PROPERTY COMPILE_DEFINITIONS
             DTRAIN_GIT_REVISION="${DTRAIN_GIT_REVISION}" DTRAIN_GIT_DIRTY=${DTRAIN_GIT_DIRTY})

# dtrain --comm nccl: the TP, DP/ZeRO and tied-embedding collectives with NCCL on device buffers,
# where CUDA and NCCL are found (comm_nccl.c otherwise says the build has none).
if(DTSIM_HAVE_CUDA AND NCCL_LIB)
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/comm_nccl.c APPEND PROPERTY COMPILE_DEFINITIONS DTRAIN_HAVE_NCCL)
  target_link_libraries(dtrain_lib PUBLIC CUDA::cudart ${NCCL_LIB})
endif()
