# ats_add_test(NAME name SOURCES a.c b.c LIBS lib... LABELS unit|golden|gpu [ARGS ...] [TIMEOUT s])
# One executable per test module; GPU tests exit 77 when there is no device and CTest reports them
# as "Not Run" (SKIP_RETURN_CODE 77).
function(ats_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} ats_testutil)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS} WORKING_DIRECTORY ${ATS_SOURCE_DIR})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "ATS_SHARED_DIR=${ATS_SHARED_DIR};ATS_SOURCE_DIR=${ATS_SOURCE_DIR};ATS_BIN=$<TARGET_FILE:ats>")
endfunction()
