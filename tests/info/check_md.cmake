# docs/tunables.md must be what `numacoll-info --params --markdown` prints.
#   cmake -DEXE=... -DDOC=... -P check_md.cmake
execute_process(COMMAND env -i NUMACOLL_TUNE_FILE=none ${EXE} --params --markdown
                OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "numacoll-info --params --markdown exited ${_rc}")
endif()
if(NOT EXISTS ${DOC})
  message(FATAL_ERROR "${DOC} is missing: numacoll-info --params --markdown > ${DOC}")
endif()
file(READ ${DOC} _doc)
if(NOT _out STREQUAL _doc)
  message(FATAL_ERROR "${DOC} is stale: regenerate it with\n"
                      "  build/bin/numacoll-info --params --markdown > docs/tunables.md")
endif()
