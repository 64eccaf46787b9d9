# Writes zklock(1) from the program's own help: cmake -DZKLOCK=path/to/zklock -DOUT=zklock.1 -P man_page.cmake
# The page is the top-level --help (NAME, SYNOPSIS, DESCRIPTION, EXIT STATUS) and each
# subcommand's --help, verbatim; so it never says what the program does not.
cmake_minimum_required(VERSION 3.20)
function(zklock_help out)
  execute_process(COMMAND "${ZKLOCK}" ${ARGN} OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ZKLOCK} ${ARGN} failed (${rc}): ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
# troff: backslashes, hyphens (so that options stay searchable and copyable), and lines that
# would start with a request character
function(zklock_troff out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

zklock_help(version --version)
string(STRIP "${version}" version)
zklock_help(top --help)
# (the first line is the summary; string(REGEX REPLACE) would apply "^" at every match)
string(FIND "${top}" "\n" nl)
string(SUBSTRING "${top}" 0 ${nl} summary)
math(EXPR nl "${nl} + 1")
string(SUBSTRING "${top}" ${nl} -1 top_rest)
string(REPLACE "zklock: " "" summary "${summary}")
zklock_troff(summary "${summary}")
zklock_troff(top_rest "${top_rest}")
string(TIMESTAMP today "%Y-%m-%d" UTC)
# (string(TIMESTAMP) honours SOURCE_DATE_EPOCH: a reproducible build sets it)
set(page ".TH ZKLOCK 1 \"${today}\" \"${version}\" \"User Commands\"
.SH NAME
zklock \\- ${summary}
.SH SYNOPSIS
.B zklock run
[\\fIOPTIONS\\fR] \\fIpath\\fR \\-\\- \\fIcommand\\fR [\\fIargs\\fR...]
.br
.B zklock list
[\\fIOPTIONS\\fR] \\fIpath\\fR
.br
.B zklock break
[\\fIOPTIONS\\fR] \\fInode\\fR
.br
.B zklock revoke
[\\fIOPTIONS\\fR] \\fIpath\\fR
.br
.B zklock \\-\\-version
.SH DESCRIPTION
.nf
${top_rest}.fi
")
foreach(sub run list break revoke)
  zklock_help(text ${sub} --help)
  zklock_troff(text "${text}")
  string(TOUPPER "${sub}" SUB)
  string(APPEND page ".SH ZKLOCK ${SUB}\n.nf\n${text}.fi\n")
endforeach()
string(APPEND page ".SH ENVIRONMENT
.TP
.B ZK_CONNECT
the connect string when \\-\\-connect is not given
.TP
.B ZK_TLS_CA, ZK_TLS_CERT, ZK_TLS_KEY, ZK_TLS_KEY_PASSWORD
TLS to the servers' secureClientPort, when the options are not given
.SH SEE ALSO
.BR flock (1)
")
file(WRITE "${OUT}" "${page}")
