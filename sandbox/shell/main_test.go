package shell

import (
	"os"
	"testing"

	"github.com/computerfs/computerfs/internal/testmount"
)

func TestMain(m *testing.M) { os.Exit(testmount.Run(m)) }
