# The startup file of a JupyterLab terminal under `make lab` (see jupyter_server_config.py beside it).
# First what bash would read for Jupyter's default terminal: a login shell's files when the server has no
# terminal of its own, ~/.bashrc otherwise. Then the course's venv, last, so that nothing in them
# (`pyenv init`, `conda activate`) puts another python before the course's.
if [ "${COURSE_TERMINAL_LOGIN:-0}" = 1 ]; then
    [ -r /etc/profile ] && . /etc/profile
    for f in ~/.bash_profile ~/.bash_login ~/.profile; do
        if [ -r "$f" ]; then . "$f"; break; fi
    done
else
    [ -r ~/.bashrc ] && . ~/.bashrc
fi
unset COURSE_TERMINAL_LOGIN
. "$(dirname "${BASH_SOURCE[0]}")/../../bin/activate"
