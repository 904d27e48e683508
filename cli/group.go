package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/exitcode"
)

// groupCommand is a command that only holds subcommands, one per noun
// (export's formats, hook's agents). Run bare, or with a name it does not
// hold, it is a usage error that lists the subcommands.
func groupCommand(use, short, noun string, subs ...*cobra.Command) *cobra.Command {
	article := "a"
	if strings.ContainsRune("aeiou", rune(noun[0])) {
		article = "an"
	}
	group := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var held []string
			for _, c := range cmd.Commands() {
				held = append(held, cmd.CommandPath()+" "+c.Name())
			}
			if len(args) > 0 {
				return exitcode.Usagef("%s: unknown %s %q: use %s", cmd.CommandPath(), noun, args[0], strings.Join(held, " or "))
			}
			return exitcode.Usagef("%s: name %s %s: %s", cmd.CommandPath(), article, noun, strings.Join(held, " or "))
		},
	}
	group.AddCommand(subs...)
	return group
}
