from adversary_sim.run import main

main()
