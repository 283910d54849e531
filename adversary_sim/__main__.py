from everlast.adversary_sim.run import main

main()
