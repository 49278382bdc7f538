# trainbench_embed(<target> <symbol> <file>): compiles <file>'s text into <target> as
# `extern const char* const <symbol>`, so presets and rule files ship inside the binary and a later
# round's rules are a new file, not a new code path.
function(trainbench_embed target symbol file)
  set(source ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/embedded/${symbol}.cpp)
  add_custom_command(
    OUTPUT ${generated}
    COMMAND ${CMAKE_COMMAND} -DSOURCE=${source} -DOUTPUT=${generated} -DSYMBOL=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    DEPENDS ${source} ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    COMMENT "Embedding ${file}")
  target_sources(${target} PRIVATE ${generated})
  # A byte array needs no headers: loading the 570 MB LibTorch PCH would cost 6–30 s for each embedded file.
  set_source_files_properties(${generated} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
