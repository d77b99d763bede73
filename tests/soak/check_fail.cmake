# A soak run that must fail (the checker's self-test, soak --corrupt): passes
# when the job exits non-zero AND its output holds the checker's message.
#   cmake -DMPIEXEC=... -DFLAGS=f1;f2 -DNPFLAG=-n -DNP=n -DEXE=soak -DARGS=a1;a2
#         -DMATCH=regex -P check_fail.cmake
execute_process(COMMAND ${MPIEXEC} ${FLAGS} ${NPFLAG} ${NP} ${EXE} ${ARGS}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 100)
message("${out}${err}---- exit ${rc}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the run passed: the spoiled call went unnoticed")
endif()
if(NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "the run failed (${rc}) without the checker's message: ${MATCH}")
endif()
