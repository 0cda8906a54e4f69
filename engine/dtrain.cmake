# dtrain: the training engine (model, data, training loop, profiler) and its tools.
find_package(Threads REQUIRED)
add_library(dtrain_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/gpt.c ${CMAKE_CURRENT_LIST_DIR}/gpt_layout.c ${CMAKE_CURRENT_LIST_DIR}/data.c
            ${CMAKE_CURRENT_LIST_DIR}/checkpoint.c ${CMAKE_CURRENT_LIST_DIR}/comm.c
            ${CMAKE_CURRENT_LIST_DIR}/data_parallel.c
            ${CMAKE_CURRENT_LIST_DIR}/rng.c ${CMAKE_CURRENT_LIST_DIR}/train.c ${CMAKE_CURRENT_LIST_DIR}/profiler.c)
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
