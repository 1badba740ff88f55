# cmake -P helper of CMakeLists.txt: javac every generated .java file plus
# the example (a glob, since protoc's output names follow the messages).
file(GLOB_RECURSE sources ${GEN}/*.java)
execute_process(
  COMMAND ${JAVAC} -nowarn -encoding UTF-8 -cp ${CLASSPATH} -d ${CLASSES}
          ${sources} ${EXAMPLE}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "javac failed (${result})")
endif()
