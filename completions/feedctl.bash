# bash completion for feedctl(1): its commands and options, feed names asked of the running
# daemon with `feedctl feeds`, and consumer names with `feedctl consumers FEED` (through the
# same --socket, if one was given). Tests/FeeddTests/CompletionTests checks it against
# `feedctl help --json`, so a command or option added to feedctl is added here too.

_feedctl() {
    local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]}
    local commands="status next follow refresh consumers lag ack forget metrics feeds ping help"
    local common="--socket --json --help --version"
    local -a socket=() operands=()
    local index command=""
    for ((index = 1; index < COMP_CWORD; index++)); do
        case ${COMP_WORDS[index]} in
            --socket) socket=(--socket "${COMP_WORDS[index+1]}"); ((index++)) ;;
            --wait) ((index++)) ;;
            -*) ;;
            *) if [[ -z $command ]]; then command=${COMP_WORDS[index]}; else operands+=("${COMP_WORDS[index]}"); fi ;;
        esac
    done

    case $previous in
        --socket)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$current"))
            return ;;
        --wait) return ;;
    esac
    if [[ -z $command ]]; then
        COMPREPLY=($(compgen -W "$commands $common" -- "$current"))
        return
    fi
    local options=$common
    case $command in
        next) options+=" --wait" ;;
        ack) options+=" --force" ;;
        help) options+=" --scdoc" ;;
    esac
    if [[ $current == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$current"))
        return
    fi
    # What the next operand is: a feed first, then (ack, forget) one of that feed's consumers.
    # A daemon that is not running offers none.
    local words=""
    case $command:${#operands[@]} in
        next:0 | follow:0 | refresh:0 | consumers:0 | lag:0 | ack:0 | forget:0)
            words=$(feedctl "${socket[@]}" feeds 2>/dev/null) ;;
        ack:1 | forget:1)
            words=$(feedctl "${socket[@]}" consumers "${operands[0]}" 2>/dev/null | tail -n +2 | cut -d ' ' -f 1) ;;
        help:0)
            words=$commands ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$current"))
}
complete -F _feedctl feedctl
