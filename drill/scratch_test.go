package drill_test

import (
	"fmt"
	"testing"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/lgtest"
)

func TestScratch(t *testing.T) {
	cl := embedtest.NewCluster(t)
	cli := cl.Client(t)
	rep, err := drill.Run(lgtest.Ctx(t), cli, drill.WithTrials(40), drill.WithDesigns(drill.Naive), drill.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Fixtures {
		fmt.Printf("%+v\n", f)
	}
	fmt.Printf("%+v\n", *rep.Designs[drill.Naive])
	rep, err = drill.Run(lgtest.Ctx(t), cli, drill.WithReplay(3), drill.WithDesigns(drill.Naive), drill.WithSeed(1), drill.WithPrefix("/x"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(rep.Replayed[0].Render(false))
	for _, v := range drill.Grade(rep.Replayed[0]) {
		fmt.Println(v)
	}
}
