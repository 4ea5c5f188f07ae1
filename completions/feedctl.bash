# bash completion for feedctl(1): its commands, and feed names asked of the running daemon
# with `feedctl feeds` (through the same --socket, if one was given).

_feedctl() {
    local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]}
    local commands="status next follow refresh metrics feeds ping"
    local -a socket=()
    local index command=""
    for ((index = 1; index < COMP_CWORD; index++)); do
        case ${COMP_WORDS[index]} in
            --socket) socket=(--socket "${COMP_WORDS[index+1]}"); ((index++)) ;;
            -*) ;;
            *) command=${COMP_WORDS[index]}; break ;;
        esac
    done

    if [[ $previous == --socket ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$current"))
        return
    fi
    if [[ -z $command ]]; then
        COMPREPLY=($(compgen -W "$commands --socket --help" -- "$current"))
        return
    fi
    # Only the word right after the command is a feed; a daemon that is not running offers none.
    case $command in
        next | follow | refresh)
            if ((COMP_CWORD == index + 1)); then
                COMPREPLY=($(compgen -W "$(feedctl "${socket[@]}" feeds 2>/dev/null)" -- "$current"))
            fi
            ;;
        status)
            COMPREPLY=($(compgen -W "--json" -- "$current"))
            ;;
    esac
}
complete -F _feedctl feedctl
