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
string(TIMESTAMP today "%Y-%m-%d" UTC)
# The subcommands: the "Subcommands:" block of the top-level --help, so that the page lists every
# one the program has (test/cli/cli_test.py checks the page against --help).
string(FIND "${top}" "Subcommands:\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${ZKLOCK} --help has no Subcommands: block")
endif()
string(SUBSTRING "${top}" ${at} -1 block)
string(REGEX MATCHALL "\n  [a-z]+ " subs "${block}")
set(subcommands "")
foreach(m IN LISTS subs)
  string(STRIP "${m}" m)
  list(APPEND subcommands "${m}")
endforeach()
# The top-level help's footer (durations, the exit statuses) is printed under every subcommand's
# help too: the page gives it once, under EXIT STATUS, and cuts it from each subcommand's.
string(FIND "${top_rest}" "\nDurations:" foot)
set(footer "")
if(NOT foot EQUAL -1)
  math(EXPR foot "${foot} + 1")
  string(SUBSTRING "${top_rest}" ${foot} -1 footer)
  string(SUBSTRING "${top_rest}" 0 ${foot} top_rest)
endif()
set(synopsis "")
set(sections "")
foreach(sub IN LISTS subcommands)
  zklock_help(text ${sub} --help)
  string(FIND "${text}" "\nDurations:" cut)
  if(NOT cut EQUAL -1)
    string(SUBSTRING "${text}" 0 ${cut} text)
    string(APPEND text "\n")
  endif()
  string(REGEX MATCH "Usage: zklock ${sub}[^\n]*" usage "${text}")
  string(REPLACE "Usage: zklock ${sub}" "" usage "${usage}")
  string(STRIP "${usage}" usage)
  zklock_troff(usage "${usage}")
  string(APPEND synopsis ".B zklock ${sub}\n${usage}\n.br\n")
  zklock_troff(text "${text}")
  string(TOUPPER "${sub}" SUB)
  string(APPEND sections ".SH ZKLOCK ${SUB}\n.nf\n${text}.fi\n")
endforeach()
zklock_troff(footer "${footer}")
zklock_troff(summary "${summary}")
zklock_troff(top_rest "${top_rest}")
# (string(TIMESTAMP) honours SOURCE_DATE_EPOCH: a reproducible build sets it)
set(page ".TH ZKLOCK 1 \"${today}\" \"${version}\" \"User Commands\"
.SH NAME
zklock \\- ${summary}
.SH SYNOPSIS
${synopsis}.B zklock \\-\\-version
.SH DESCRIPTION
.nf
${top_rest}.fi
${sections}.SH EXIT STATUS
.nf
${footer}.fi
")
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
