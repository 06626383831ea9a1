# Run at install time (CMakeLists.txt sets IKNET_PYTHON and IKNET_PYTHON_DIR): compiles the
# solver kernels into numba's cache beside the installed package.
if(NOT IKNET_PYTHON)
  set(IKNET_PYTHON python3)
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${IKNET_PYTHON_DIR}:$ENV{PYTHONPATH}"
    ${IKNET_PYTHON} -m iknet_core.solvers.warm_up
  RESULT_VARIABLE iknet_warm_up_result)
if(NOT iknet_warm_up_result EQUAL 0)
  message(WARNING "iknet: compiling the solver kernels failed; ik_server compiles them at its first start")
endif()
