# The Python module's tests (included from python/CMakeLists.txt), label `python`:
#   Python.<file>           each tests/python/test_*.py under Debian's pytest, against the
#                           build tree's package and the bitsim command beside it
#   Python.Notebook.*       docs/notebooks/design-space.ipynb executed headless by Debian's
#                           jupyter-nbconvert, the HTML and the figures written under
#                           build/notebooks/ (a cell that raises fails the test)
# Both use the build tree's start-up cache, never the user's. Without pytest or nbconvert
# installed the tests skip (exit 77) and say which package is missing.
set(_py_env
  PYTHONPATH=${BITSIM_PYTHON_DIR}
  PYTHONDONTWRITEBYTECODE=1
  BITSIM_SOURCE_DIR=${PROJECT_SOURCE_DIR}
  BITSIM_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache)

execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pytest" RESULT_VARIABLE _bitsim_no_pytest
                OUTPUT_QUIET ERROR_QUIET)
file(GLOB _bitsim_py_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
foreach(_f ${_bitsim_py_tests})
  get_filename_component(_n ${_f} NAME_WE)
  if(_bitsim_no_pytest)
    add_test(NAME Python.${_n} COMMAND ${CMAKE_COMMAND} -E echo "skipped: no pytest (apt-get install python3-pytest)")
    set_tests_properties(Python.${_n} PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: no pytest")
  else()
    add_test(NAME Python.${_n}
             COMMAND ${CMAKE_COMMAND} -E env ${_py_env} BITSIM_BINARY=$<TARGET_FILE:bitsim>
                     ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs ${_f}
             WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  endif()
  set_tests_properties(Python.${_n} PROPERTIES LABELS python TIMEOUT 600)
endforeach()

find_program(BITSIM_NBCONVERT jupyter-nbconvert HINTS /usr/bin)
set(_nb ${PROJECT_SOURCE_DIR}/docs/notebooks/design-space.ipynb)
if(BITSIM_NBCONVERT)
  # JUPYTER_DATA_DIR in the build tree: the kernel is Debian's python3 (the system kernel
  # spec), whatever kernels the user has registered.
  add_test(NAME Python.Notebook.DesignSpaceRunsHeadless
           COMMAND ${CMAKE_COMMAND} -E env ${_py_env} BITSIM_NOTEBOOK_FIGURES=${CMAKE_BINARY_DIR}/notebooks/figures
                   JUPYTER_DATA_DIR=${CMAKE_BINARY_DIR}/notebooks/jupyter PYDEVD_DISABLE_FILE_VALIDATION=1
                   ${BITSIM_NBCONVERT} --to html --execute --ExecutePreprocessor.timeout=900
                   --ExecutePreprocessor.kernel_name=python3 --output-dir ${CMAKE_BINARY_DIR}/notebooks ${_nb})
else()
  add_test(NAME Python.Notebook.DesignSpaceRunsHeadless
           COMMAND ${CMAKE_COMMAND} -E echo "skipped: no jupyter-nbconvert (apt-get install jupyter-nbconvert python3-ipykernel)")
  set_tests_properties(Python.Notebook.DesignSpaceRunsHeadless PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: no")
endif()
set_tests_properties(Python.Notebook.DesignSpaceRunsHeadless PROPERTIES LABELS python TIMEOUT 1200)

# `cmake --install` puts the package where Debian's python3 finds it (for the prefixes /usr
# and /usr/local; another prefix is the user's own path to set).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/usr/local")
  add_test(NAME Python.InstallPutsThePackageWhereDebiansPython3FindsIt
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${Python3_EXECUTABLE} ${CMAKE_BINARY_DIR}
                   ${CMAKE_INSTALL_PREFIX} ${BITSIM_PYTHON_INSTALL_DIR} $<TARGET_FILE:bitsim>)
  set_tests_properties(Python.InstallPutsThePackageWhereDebiansPython3FindsIt PROPERTIES LABELS python TIMEOUT 60)
endif()
