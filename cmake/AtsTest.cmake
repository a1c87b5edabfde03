# ats_add_test(NAME name SOURCES a.c b.c LIBS lib... LABELS unit|golden|gpu [ARGS ...] [TIMEOUT s] [SCRATCH])
# One executable per test module; GPU tests exit 77 when there is no device and CTest reports them
# as "Not Run" (SKIP_RETURN_CODE 77).
# SCRATCH: the test makes its scratch folder with tu_tmpdir; it runs through tests/check_scratch.sh, which
# fails it when a passing run leaves anything in /tmp (a failing run keeps its folder and says where).
function(ats_add_test)
  cmake_parse_arguments(T "SCRATCH" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} ats_testutil)
  if(T_SCRATCH)
    # a test with a tu_tmpdir scratch folder: run with TMPDIR of its own, fail when a pass leaves files
    add_test(NAME ${T_NAME} COMMAND sh ${ATS_SOURCE_DIR}/tests/check_scratch.sh $<TARGET_FILE:${T_NAME}> ${T_ARGS}
             WORKING_DIRECTORY ${ATS_SOURCE_DIR})
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS} WORKING_DIRECTORY ${ATS_SOURCE_DIR})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "ATS_SHARED_DIR=${ATS_SHARED_DIR};ATS_SOURCE_DIR=${ATS_SOURCE_DIR};ATS_BIN=$<TARGET_FILE:ats>")
endfunction()
